// @nodetool-ai/sandbox-geo: great-circle geometry on a spherical Earth (mean radius
// 6371.0088 km). Points are `{ lat, lon }` objects in decimal degrees (`lng` is accepted for
// `lon`). Distances take `{ unit }`: "km" (default), "m", "mi" (statute miles) or "nmi"
// (nautical miles). Bearings are degrees clockwise from true north, in [0, 360).

import {
  checkNumber,
  checkPoint,
  checkPoints,
  checkUnit,
  clampUnit,
  earthRadius,
  normalizeBearing,
  normalizeLongitude,
  toDegrees,
  toRadians,
} from "./internal/math.js";

/** Central angle in radians between two checked points (haversine formula). */
function centralAngle(a, b) {
  const phi1 = toRadians(a.lat);
  const phi2 = toRadians(b.lat);
  const dPhi = phi2 - phi1;
  const dLambda = toRadians(b.lon - a.lon);
  const sinPhi = Math.sin(dPhi / 2);
  const sinLambda = Math.sin(dLambda / 2);
  const h = clampUnit(sinPhi * sinPhi + Math.cos(phi1) * Math.cos(phi2) * sinLambda * sinLambda);
  return 2 * Math.atan2(Math.sqrt(h), Math.sqrt(1 - h));
}

/** Initial bearing in degrees from one checked point to another. */
function bearing(a, b) {
  const phi1 = toRadians(a.lat);
  const phi2 = toRadians(b.lat);
  const dLambda = toRadians(b.lon - a.lon);
  const y = Math.sin(dLambda) * Math.cos(phi2);
  const x = Math.cos(phi1) * Math.sin(phi2) - Math.sin(phi1) * Math.cos(phi2) * Math.cos(dLambda);
  return normalizeBearing(toDegrees(Math.atan2(y, x)));
}

/**
 * Great-circle distance between `a` and `b` in `unit` (default "km").
 * haversine({ lat: 48.8566, lon: 2.3522 }, { lat: 51.5074, lon: -0.1278 }) // ≈ 343.6
 */
export function haversine(a, b, options) {
  const p = checkPoint("haversine", "a", a);
  const q = checkPoint("haversine", "b", b);
  const unit = checkUnit("haversine", options);
  return centralAngle(p, q) * earthRadius(unit);
}

/** Bearing in degrees [0, 360) to leave `a` on the great circle to `b` (0 when a equals b). */
export function initialBearing(a, b) {
  const p = checkPoint("initialBearing", "a", a);
  const q = checkPoint("initialBearing", "b", b);
  return bearing(p, q);
}

/** Bearing in degrees [0, 360) on arrival at `b` when travelling the great circle from `a`. */
export function finalBearing(a, b) {
  const p = checkPoint("finalBearing", "a", a);
  const q = checkPoint("finalBearing", "b", b);
  return normalizeBearing(bearing(q, p) + 180);
}

/** The point halfway along the great circle from `a` to `b`, as `{ lat, lon }`. */
export function midpoint(a, b) {
  const p = checkPoint("midpoint", "a", a);
  const q = checkPoint("midpoint", "b", b);
  const phi1 = toRadians(p.lat);
  const phi2 = toRadians(q.lat);
  const dLambda = toRadians(q.lon - p.lon);
  const bx = Math.cos(phi2) * Math.cos(dLambda);
  const by = Math.cos(phi2) * Math.sin(dLambda);
  const lat = Math.atan2(
    Math.sin(phi1) + Math.sin(phi2),
    Math.sqrt((Math.cos(phi1) + bx) * (Math.cos(phi1) + bx) + by * by),
  );
  const lon = toRadians(p.lon) + Math.atan2(by, Math.cos(phi1) + bx);
  return { lat: toDegrees(lat), lon: normalizeLongitude(toDegrees(lon)) };
}

/**
 * The point reached from `start` after `distance` (in `unit`, default "km") along the great
 * circle that leaves `start` at `bearingDeg`, as `{ lat, lon }`.
 */
export function destination(start, bearingDeg, distance, options) {
  const p = checkPoint("destination", "start", start);
  const theta = toRadians(checkNumber("destination", "bearingDeg", bearingDeg));
  const d = checkNumber("destination", "distance", distance, 0);
  const unit = checkUnit("destination", options);
  const delta = d / earthRadius(unit);
  const phi1 = toRadians(p.lat);
  const sinPhi2 = clampUnit(
    Math.sin(phi1) * Math.cos(delta) + Math.cos(phi1) * Math.sin(delta) * Math.cos(theta),
  );
  const phi2 = Math.asin(sinPhi2);
  const lambda2 =
    toRadians(p.lon) +
    Math.atan2(
      Math.sin(theta) * Math.sin(delta) * Math.cos(phi1),
      Math.cos(delta) - Math.sin(phi1) * sinPhi2,
    );
  return { lat: toDegrees(phi2), lon: normalizeLongitude(toDegrees(lambda2)) };
}

/**
 * The smallest latitude/longitude box holding every point: `{ minLat, minLon, maxLat, maxLon }`.
 * When that box crosses the antimeridian (points on both sides of ±180°, closer across it than
 * around through 0°), `minLon > maxLon`: the box runs east from minLon, across 180°, to maxLon
 * (the RFC 7946 GeoJSON bbox convention). The box holds the points, not the great-circle arcs
 * between them.
 */
export function boundingBox(points) {
  const pts = checkPoints("boundingBox", "points", points, 1);
  let minLat = Infinity;
  let maxLat = -Infinity;
  const lons = new Array(pts.length);
  for (let i = 0; i < pts.length; i++) {
    const { lat, lon } = pts[i];
    if (lat < minLat) minLat = lat;
    if (lat > maxLat) maxLat = lat;
    lons[i] = lon;
  }
  lons.sort((x, y) => x - y);
  // The box leaves out the largest empty arc of longitudes. If that arc is the one across
  // the antimeridian (from the easternmost point around to the westernmost), the box is the
  // plain [min, max]; otherwise it starts after the gap and wraps.
  let west = lons[0];
  let east = lons[lons.length - 1];
  let widestGap = lons[0] + 360 - lons[lons.length - 1];
  for (let i = 1; i < lons.length; i++) {
    const gap = lons[i] - lons[i - 1];
    if (gap > widestGap) {
      widestGap = gap;
      west = lons[i];
      east = lons[i - 1];
    }
  }
  return { minLat, minLon: west, maxLat, maxLon: east };
}

/** Total great-circle length of the path through `points` in order, in `unit` (default "km"). */
export function pathLength(points, options) {
  const pts = checkPoints("pathLength", "points", points, 0);
  const unit = checkUnit("pathLength", options);
  let radians = 0;
  for (let i = 1; i < pts.length; i++) {
    radians += centralAngle(pts[i - 1], pts[i]);
  }
  return radians * earthRadius(unit);
}
