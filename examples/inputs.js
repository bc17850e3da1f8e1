// Distance, bearings and midpoint between two points passed in as inputs.
// Run:
//   nodetool run examples/inputs.js --input '{"a": {"lat": 48.8566, "lon": 2.3522}, "b": {"lat": 51.5074, "lon": -0.1278}}'
// Try an invalid point (e.g. "lat": 91) to see the TypeError that names the argument.
import { finalBearing, haversine, initialBearing, midpoint } from "@nodetool-ai/sandbox-geo";

if (!inputs || !inputs.a || !inputs.b) {
  throw new Error(
    'pass two points: --input \'{"a": {"lat": 48.8566, "lon": 2.3522}, "b": {"lat": 51.5074, "lon": -0.1278}}\'',
  );
}
const { a, b } = inputs;
const round = (x, digits) => Math.round(x * 10 ** digits) / 10 ** digits;
const km = haversine(a, b); // throws a TypeError naming a or b if a point is invalid
const mid = midpoint(a, b);

return {
  km: round(km, 1),
  nmi: round(haversine(a, b, { unit: "nmi" }), 1),
  initialBearing: round(initialBearing(a, b), 1),
  finalBearing: round(finalBearing(a, b), 1),
  midpoint: { lat: round(mid.lat, 4), lon: round(mid.lon, 4) },
};
