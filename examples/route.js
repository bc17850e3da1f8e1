// A walking route through central London: its length, bounding box and an encoded polyline
// (the compact string map APIs such as Google Maps and OSRM accept).
// Run: nodetool run examples/route.js
import { boundingBox, pathLength } from "@nodetool-ai/sandbox-geo";
import { decode, encode } from "@nodetool-ai/sandbox-geo/polyline";

const route = [
  { lat: 51.5007, lon: -0.1246 }, // Big Ben
  { lat: 51.5033, lon: -0.1196 }, // London Eye
  { lat: 51.5081, lon: -0.0972 }, // Millennium Bridge
  { lat: 51.5138, lon: -0.0984 }, // St Paul's Cathedral
  { lat: 51.5081, lon: -0.0759 }, // Tower of London
];

const polyline = encode(route);
const back = decode(polyline);
const km = pathLength(route);

return {
  stops: route.length,
  km: Math.round(km * 100) / 100,
  metres: Math.round(pathLength(route, { unit: "m" })),
  box: boundingBox(route),
  polyline,
  roundTrips: back.length === route.length &&
    back.every((p, i) => p.lat === route[i].lat && p.lon === route[i].lon),
};
