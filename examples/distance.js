// Great-circle distances between a few cities, with @nodetool-ai/sandbox-geo.
// Run: nodetool run examples/distance.js
import { haversine, initialBearing } from "@nodetool-ai/sandbox-geo";

const cities = {
  paris: { lat: 48.8566, lon: 2.3522 },
  london: { lat: 51.5074, lon: -0.1278 },
  newYork: { lat: 40.7128, lon: -74.006 },
  tokyo: { lat: 35.6762, lon: 139.6503 },
};

const round1 = (x) => Math.round(x * 10) / 10;
const names = Object.keys(cities);
const legs = [];
for (let i = 0; i < names.length; i++) {
  for (let j = i + 1; j < names.length; j++) {
    const a = cities[names[i]];
    const b = cities[names[j]];
    legs.push({
      from: names[i],
      to: names[j],
      km: round1(haversine(a, b)),
      mi: round1(haversine(a, b, { unit: "mi" })),
      bearing: round1(initialBearing(a, b)),
    });
  }
}
legs.sort((x, y) => x.km - y.km);

return {
  parisToLondonKm: round1(haversine(cities.paris, cities.london)),
  closest: `${legs[0].from}–${legs[0].to}`,
  farthest: `${legs[legs.length - 1].from}–${legs[legs.length - 1].to}`,
  legs,
};
