// The standard globals' URL, URLSearchParams group (see guest/src/globals.js): evaluated on the first read of
// one of its names, with the helpers the main script captured before any module ran.
(function (h) {
"use strict";
const { S, defineProperty, freeze, getOwnPropertyDescriptor, keys, apply, ownKeys, TypeErr, iteratorSymbol, strSlice, arrayPush, arraySort, arrayValues, n, method, usv } = h;
const FIELDS = ["href", "origin", "protocol", "username", "password", "host", "hostname", "port", "pathname", "search", "hash"];
let paramsOfUrl, setUrlQuery, reparse;
class URLSearchParams {
  #list = [];
  #url = null;
  constructor(init = undefined) {
    if (init === undefined || init === null) return;
    if (typeof init === "object" || typeof init === "function") {
      if (typeof init[iteratorSymbol] === "function") {
        for (const pair of init) {
          if (pair === null || (typeof pair !== "object" && typeof pair !== "function") || typeof pair[iteratorSymbol] !== "function") {
            throw new TypeErr("URLSearchParams: each item of the sequence must be a [name, value] pair");
          }
          const items = [];
          for (const item of pair) apply(arrayPush, items, [item]);
          if (items.length !== 2) throw new TypeErr("URLSearchParams: each item of the sequence must be a [name, value] pair");
          apply(arrayPush, this.#list, [[usv(items[0]), usv(items[1])]]);
        }
        return;
      }
      for (const key of ownKeys(init)) {
        if (typeof key !== "string") continue;
        const desc = getOwnPropertyDescriptor(init, key);
        if (desc === undefined || !desc.enumerable) continue;
        apply(arrayPush, this.#list, [[usv(key), usv(init[key])]]);
      }
      return;
    }
    let text = usv(init);
    if (text[0] === "?") text = apply(strSlice, text, [1]);
    this.#parse(text);
  }
  #parse(text) {
    const flat = n.formParse(text);
    const list = [];
    for (let i = 0; i + 1 < flat.length; i += 2) apply(arrayPush, list, [[flat[i], flat[i + 1]]]);
    this.#list = list;
  }
  #update() {
    if (this.#url !== null) setUrlQuery(this.#url, this.toString());
  }
  static {
    paramsOfUrl = (url, search) => {
      const params = new URLSearchParams();
      params.#url = url;
      params.#parse(search[0] === "?" ? apply(strSlice, search, [1]) : search);
      return params;
    };
    reparse = (params, search) => params.#parse(search[0] === "?" ? apply(strSlice, search, [1]) : search);
  }
  get size() { return this.#list.length; }
  append(name, value) {
    if (arguments.length < 2) throw new TypeErr("URLSearchParams.append: 2 arguments required");
    apply(arrayPush, this.#list, [[usv(name), usv(value)]]);
    this.#update();
  }
  delete(name, value = undefined) {
    if (arguments.length < 1) throw new TypeErr("URLSearchParams.delete: 1 argument required");
    const key = usv(name), v = value === undefined ? undefined : usv(value);
    const kept = [];
    for (const pair of this.#list) if (!(pair[0] === key && (v === undefined || pair[1] === v))) apply(arrayPush, kept, [pair]);
    this.#list = kept;
    this.#update();
  }
  get(name) {
    if (arguments.length < 1) throw new TypeErr("URLSearchParams.get: 1 argument required");
    const key = usv(name);
    for (const pair of this.#list) if (pair[0] === key) return pair[1];
    return null;
  }
  getAll(name) {
    if (arguments.length < 1) throw new TypeErr("URLSearchParams.getAll: 1 argument required");
    const key = usv(name), out = [];
    for (const pair of this.#list) if (pair[0] === key) apply(arrayPush, out, [pair[1]]);
    return out;
  }
  has(name, value = undefined) {
    if (arguments.length < 1) throw new TypeErr("URLSearchParams.has: 1 argument required");
    const key = usv(name), v = value === undefined ? undefined : usv(value);
    for (const pair of this.#list) if (pair[0] === key && (v === undefined || pair[1] === v)) return true;
    return false;
  }
  set(name, value) {
    if (arguments.length < 2) throw new TypeErr("URLSearchParams.set: 2 arguments required");
    const key = usv(name), v = usv(value), kept = [];
    let found = false;
    for (const pair of this.#list) {
      if (pair[0] !== key) apply(arrayPush, kept, [pair]);
      else if (!found) { found = true; apply(arrayPush, kept, [[key, v]]); }
    }
    if (!found) apply(arrayPush, kept, [[key, v]]);
    this.#list = kept;
    this.#update();
  }
  sort() {
    // Stable, by UTF-16 code units of the name.
    const indexed = [];
    for (let i = 0; i < this.#list.length; i++) apply(arrayPush, indexed, [[this.#list[i], i]]);
    apply(arraySort, indexed, [(a, b) => (a[0][0] < b[0][0] ? -1 : a[0][0] > b[0][0] ? 1 : a[1] - b[1])]);
    const sorted = [];
    for (const item of indexed) apply(arrayPush, sorted, [item[0]]);
    this.#list = sorted;
    this.#update();
  }
  forEach(callback, thisArg = undefined) {
    if (typeof callback !== "function") throw new TypeErr("URLSearchParams.forEach: the callback must be a function");
    for (let i = 0; i < this.#list.length; i++) apply(callback, thisArg, [this.#list[i][1], this.#list[i][0], this]);
  }
  entries() {
    const out = [];
    for (const pair of this.#list) apply(arrayPush, out, [[pair[0], pair[1]]]);
    return apply(arrayValues, out, []);
  }
  keys() {
    const out = [];
    for (const pair of this.#list) apply(arrayPush, out, [pair[0]]);
    return apply(arrayValues, out, []);
  }
  values() {
    const out = [];
    for (const pair of this.#list) apply(arrayPush, out, [pair[1]]);
    return apply(arrayValues, out, []);
  }
  toString() {
    const flat = [];
    for (const pair of this.#list) apply(arrayPush, flat, [pair[0], pair[1]]);
    return n.formSerialize(flat);
  }
}
method(URLSearchParams.prototype, iteratorSymbol, URLSearchParams.prototype.entries);
defineProperty(URLSearchParams.prototype, Symbol.toStringTag, { value: "URLSearchParams", configurable: true });

class URL {
  #record;
  #params = null;
  constructor(url, base = undefined) {
    if (arguments.length === 0) throw new TypeErr("URL: 1 argument required");
    const record = n.urlParse(usv(url), base === undefined ? null : usv(base));
    if (record === null) throw new TypeErr("Invalid URL: " + S(url));
    this.#record = record;
  }
  static canParse(url, base = undefined) {
    if (arguments.length === 0) throw new TypeErr("URL.canParse: 1 argument required");
    return n.urlParse(usv(url), base === undefined ? null : usv(base)) !== null;
  }
  static parse(url, base = undefined) {
    if (arguments.length === 0) throw new TypeErr("URL.parse: 1 argument required");
    try { return new URL(url, base); } catch (_) { return null; }
  }
  static {
    setUrlQuery = (url, query) => {
      // An empty query drops the "?" (the URL standard's URLSearchParams update steps).
      const record = n.urlSet(url.#record[0], "search", query);
      if (record !== null) url.#record = record;
    };
  }
  #set(field, value) {
    const record = n.urlSet(this.#record[0], field, usv(value));
    if (record === null) {
      if (field === "href") throw new TypeErr("Invalid URL: " + S(value));
      return;
    }
    this.#record = record;
    if (this.#params !== null && (field === "href" || field === "search")) reparse(this.#params, record[9]);
  }
  get href() { return this.#record[0]; }
  set href(value) { this.#set("href", value); }
  get origin() { return this.#record[1]; }
  get protocol() { return this.#record[2]; }
  set protocol(value) { this.#set("protocol", value); }
  get username() { return this.#record[3]; }
  set username(value) { this.#set("username", value); }
  get password() { return this.#record[4]; }
  set password(value) { this.#set("password", value); }
  get host() { return this.#record[5]; }
  set host(value) { this.#set("host", value); }
  get hostname() { return this.#record[6]; }
  set hostname(value) { this.#set("hostname", value); }
  get port() { return this.#record[7]; }
  set port(value) { this.#set("port", value); }
  get pathname() { return this.#record[8]; }
  set pathname(value) { this.#set("pathname", value); }
  get search() { return this.#record[9]; }
  set search(value) { this.#set("search", value); }
  get searchParams() {
    if (this.#params === null) this.#params = paramsOfUrl(this, this.#record[9]);
    return this.#params;
  }
  get hash() { return this.#record[10]; }
  set hash(value) { this.#set("hash", value); }
  toString() { return this.#record[0]; }
  toJSON() { return this.#record[0]; }
}
defineProperty(URL.prototype, Symbol.toStringTag, { value: "URL", configurable: true });
for (const name of FIELDS) {
  const desc = getOwnPropertyDescriptor(URL.prototype, name);
  if (desc !== undefined) { desc.enumerable = true; defineProperty(URL.prototype, name, desc); }
}
freeze(URL.prototype);
freeze(URL);
freeze(URLSearchParams.prototype);
freeze(URLSearchParams);
return { URL, URLSearchParams };
})
