// Bundle entry.js into ../ext-apps.js (minified IIFE, global `McpApps`), with the licences of what it holds.
// zod's error-message locales are cut to English (they are ~250 KB of the bundle and the bridge never shows them).
import * as esbuild from "esbuild";
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

const englishOnly = {
  name: "zod-english-only",
  setup(build) {
    build.onResolve({ filter: /locales\/index\.js$/ }, (args) => ({ path: args.resolveDir, namespace: "zod-locales" }));
    build.onLoad({ filter: /.*/, namespace: "zod-locales" }, (args) => ({
      contents: `export { default as en } from ${JSON.stringify(path.join(path.dirname(args.path), "locales", "en.js"))};`,
      resolveDir: args.path,
    }));
  },
};

const result = await esbuild.build({
  entryPoints: ["entry.js"],
  bundle: true,
  minify: true,
  format: "iife",
  globalName: "McpApps",
  target: "es2020",
  legalComments: "none",
  plugins: [englishOnly],
  write: false,
});
const packages = ["@modelcontextprotocol/ext-apps", "@modelcontextprotocol/client", "@modelcontextprotocol/core", "zod"];
const versions = packages.map((name) => {
  const meta = JSON.parse(readFileSync(path.join("node_modules", name, "package.json"), "utf8"));
  return `${name}@${meta.version} (${meta.license})`;
});
const banner =
  "/* Built by tools/apps/bundle (make app-bridge) from " + versions.join(", ") +
  ". Licences: tools/apps/THIRD_PARTY_LICENSES.txt. Do not edit: rebuild. */\n";
writeFileSync("../ext-apps.js", banner + result.outputFiles[0].text);
console.log(`../ext-apps.js: ${result.outputFiles[0].text.length} bytes from ${versions.join(", ")}`);
