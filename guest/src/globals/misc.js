// The standard globals' queueMicrotask, performance, sleep group (see guest/src/globals.js): evaluated on the first read of
// one of its names, with the helpers the main script captured before any module ran.
(function (h) {
"use strict";
const { S, N, freeze, apply, P, TypeErr, RangeErr, mathTrunc, promiseThen, promiseResolve, promiseReject, n } = h;
const queueMicrotask = function queueMicrotask(callback) {
  if (typeof callback !== "function") throw new TypeErr("queueMicrotask: the callback must be a function");
  apply(promiseThen, apply(promiseResolve, P, [undefined]), [() => { callback(); }]);
};
const performance = freeze({ now: function now() { return n.now(); } });
const sleep = function sleep(ms = 0) {
  let wait = N(ms);
  if (!(wait > 0)) wait = 0;
  if (wait === Infinity) wait = 1e300;
  wait = mathTrunc(wait);
  const promise = n.sleep(wait);
  if (promise === null) {
    return apply(promiseReject, P, [new RangeErr("sleep(" + S(ms) + ") would end after the run's deadline")]);
  }
  return apply(promiseThen, promise, [() => undefined]);
};
return { queueMicrotask, performance, sleep };
})
