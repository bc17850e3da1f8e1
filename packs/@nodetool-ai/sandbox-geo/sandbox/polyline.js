// @nodetool-ai/sandbox-geo/polyline: Google's encoded polyline algorithm format.
// https://developers.google.com/maps/documentation/utilities/polylinealgorithm
// Points are `{ lat, lon }` objects (`lng` is accepted for `lon`); precision is the number of
// decimal digits kept: 5 for Google Maps, 6 for OSRM / Valhalla "polyline6".

import { checkInteger, checkPoints, describe } from "./internal/math.js";

const MAX_PRECISION = 10;

/** Rounds half away from zero, as the reference implementation does. */
function roundHalfAway(x) {
  return x < 0 ? -Math.round(-x) : Math.round(x);
}

/** Appends one signed integer in the format's 5-bit chunks. Arithmetic, not bitwise, so
 * values beyond 32 bits (high precisions) stay exact. */
function encodeValue(value) {
  let v = value < 0 ? -2 * value - 1 : 2 * value;
  let out = "";
  while (v >= 32) {
    out += String.fromCharCode((v % 32) + 32 + 63);
    v = Math.floor(v / 32);
  }
  return out + String.fromCharCode(v + 63);
}

/**
 * Encodes `points` (an array of `{ lat, lon }`) as an encoded polyline string.
 * encode([{ lat: 38.5, lon: -120.2 }, { lat: 40.7, lon: -120.95 }, { lat: 43.252, lon: -126.453 }])
 * // "_p~iF~ps|U_ulLnnqC_mqNvxq`@"
 */
export function encode(points, precision) {
  const pts = checkPoints("encode", "points", points, 0);
  const digits = checkInteger("encode", "precision", precision, 0, MAX_PRECISION, 5);
  const factor = Math.pow(10, digits);
  let out = "";
  let lastLat = 0;
  let lastLon = 0;
  for (const { lat, lon } of pts) {
    const la = roundHalfAway(lat * factor);
    const lo = roundHalfAway(lon * factor);
    out += encodeValue(la - lastLat) + encodeValue(lo - lastLon);
    lastLat = la;
    lastLon = lo;
  }
  return out;
}

/**
 * Decodes an encoded polyline string into an array of `{ lat, lon }` points.
 * Throws a TypeError naming the offending position when the string is not a polyline.
 */
export function decode(str, precision) {
  if (typeof str !== "string") {
    throw new TypeError(`decode: str must be a string (got ${describe(str)})`);
  }
  const digits = checkInteger("decode", "precision", precision, 0, MAX_PRECISION, 5);
  const factor = Math.pow(10, digits);
  const points = [];
  let index = 0;
  let lat = 0;
  let lon = 0;
  const next = () => {
    let result = 0;
    let scale = 1;
    for (;;) {
      if (index >= str.length) {
        throw new TypeError(`decode: str is not a valid encoded polyline: it ends in the middle of a value`);
      }
      const code = str.charCodeAt(index) - 63;
      if (code < 0 || code > 63) {
        throw new TypeError(
          `decode: str is not a valid encoded polyline: unexpected character ${JSON.stringify(str[index])} at index ${index}`,
        );
      }
      index++;
      result += (code % 32) * scale;
      if (code < 32) break;
      scale *= 32;
      if (scale > 2 ** 50) {
        throw new TypeError(`decode: str is not a valid encoded polyline: a value at index ${index} is too long`);
      }
    }
    return result % 2 === 1 ? -(result + 1) / 2 : result / 2;
  };
  while (index < str.length) {
    lat += next();
    if (index >= str.length) {
      throw new TypeError(`decode: str is not a valid encoded polyline: it ends after a latitude with no longitude`);
    }
    lon += next();
    points.push({ lat: lat / factor, lon: lon / factor });
  }
  return points;
}
