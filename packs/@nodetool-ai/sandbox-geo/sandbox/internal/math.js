// Shared helpers of @nodetool-ai/sandbox-geo: angle conversion, the Earth's radius per unit,
// and argument checks that throw a TypeError naming the function and the argument.
// Internal: importable only by this pack's own modules.

/** Mean Earth radius in metres (IUGG mean radius R1, as used by most great-circle tools). */
export const EARTH_RADIUS_M = 6371008.8;

/** Metres per distance unit. */
export const METRES_PER_UNIT = Object.freeze({
  km: 1000,
  m: 1,
  mi: 1609.344,
  nmi: 1852,
});

/** The units `{ unit }` accepts, in the order error messages list them. */
export const UNITS = Object.freeze(Object.keys(METRES_PER_UNIT));

/** Degrees to radians. */
export function toRadians(degrees) {
  return (degrees * Math.PI) / 180;
}

/** Radians to degrees. */
export function toDegrees(radians) {
  return (radians * 180) / Math.PI;
}

/** The Earth's mean radius in `unit` (one of UNITS). */
export function earthRadius(unit) {
  return EARTH_RADIUS_M / METRES_PER_UNIT[unit];
}

/** A longitude in degrees brought into [-180, 180). */
export function normalizeLongitude(lon) {
  const wrapped = (((lon + 180) % 360) + 360) % 360 - 180;
  return wrapped === 0 ? 0 : wrapped; // no -0
}

/** Bearing in degrees brought into [0, 360). */
export function normalizeBearing(degrees) {
  const wrapped = ((degrees % 360) + 360) % 360;
  return wrapped === 0 || wrapped === 360 ? 0 : wrapped;
}

/** Clamps `x` into [-1, 1] so rounding noise never makes asin/acos return NaN. */
export function clampUnit(x) {
  return x > 1 ? 1 : x < -1 ? -1 : x;
}

/** A short description of a value for error messages. */
export function describe(value) {
  if (value === null) return "null";
  if (value === undefined) return "undefined";
  if (Array.isArray(value)) return "an array";
  switch (typeof value) {
    case "number":
      return String(value);
    case "string":
      return JSON.stringify(value.length > 40 ? value.slice(0, 40) + "..." : value);
    case "boolean":
      return String(value);
    case "bigint":
      return `${value}n`;
    case "function":
      return "a function";
    default:
      return "an object";
  }
}

function isFiniteNumber(value) {
  return typeof value === "number" && Number.isFinite(value);
}

/**
 * Checks a `{ lat, lon }` point (`lng` is accepted for `lon`) and returns plain numbers.
 * `fn` is the public function's name and `name` the argument's, e.g. ("haversine", "a").
 */
export function checkPoint(fn, name, point) {
  if (point === null || typeof point !== "object" || Array.isArray(point)) {
    throw new TypeError(
      `${fn}: ${name} must be an object like { lat: 48.85, lon: 2.35 } (got ${describe(point)})`,
    );
  }
  const lat = point.lat;
  const lon = point.lon !== undefined ? point.lon : point.lng;
  if (!isFiniteNumber(lat) || lat < -90 || lat > 90) {
    throw new TypeError(
      `${fn}: ${name}.lat must be a finite number between -90 and 90 (got ${describe(lat)})`,
    );
  }
  if (!isFiniteNumber(lon) || lon < -180 || lon > 180) {
    throw new TypeError(
      `${fn}: ${name}.lon must be a finite number between -180 and 180 (got ${describe(lon)})`,
    );
  }
  return { lat, lon };
}

/** Checks an array of points; errors name the element, e.g. `points[2].lat`. */
export function checkPoints(fn, name, points, minLength) {
  if (!Array.isArray(points)) {
    throw new TypeError(`${fn}: ${name} must be an array of { lat, lon } points (got ${describe(points)})`);
  }
  if (points.length < minLength) {
    throw new TypeError(
      `${fn}: ${name} must hold at least ${minLength} point${minLength === 1 ? "" : "s"} (got ${points.length})`,
    );
  }
  const out = new Array(points.length);
  for (let i = 0; i < points.length; i++) {
    out[i] = checkPoint(fn, `${name}[${i}]`, points[i]);
  }
  return out;
}

/** Checks a finite number, optionally at least `min`. */
export function checkNumber(fn, name, value, min) {
  if (!isFiniteNumber(value)) {
    throw new TypeError(`${fn}: ${name} must be a finite number (got ${describe(value)})`);
  }
  if (min !== undefined && value < min) {
    throw new TypeError(`${fn}: ${name} must be at least ${min} (got ${describe(value)})`);
  }
  return value;
}

/** Reads `{ unit }` from an optional options object; the default unit is "km". */
export function checkUnit(fn, options) {
  if (options === undefined || options === null) return "km";
  if (typeof options !== "object" || Array.isArray(options)) {
    throw new TypeError(`${fn}: options must be an object like { unit: "km" } (got ${describe(options)})`);
  }
  const unit = options.unit === undefined ? "km" : options.unit;
  if (typeof unit !== "string" || !Object.prototype.hasOwnProperty.call(METRES_PER_UNIT, unit)) {
    throw new TypeError(
      `${fn}: options.unit must be one of ${UNITS.map((u) => JSON.stringify(u)).join(", ")} (got ${describe(unit)})`,
    );
  }
  return unit;
}

/** Checks an integer in [min, max], or returns `fallback` when the value is undefined. */
export function checkInteger(fn, name, value, min, max, fallback) {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new TypeError(
      `${fn}: ${name} must be an integer between ${min} and ${max} (got ${describe(value)})`,
    );
  }
  return value;
}
