// `npm run prepare`, which npm runs on `npm ci` here, on `npm pack`, and when an app installs
// this folder by its path: compile src/ to build/src, JavaScript and .d.ts, which the package's
// `exports` name; the browser-safe main entry without Node's types, then the producer's with them. The compiler is a devDependency, so this folder needs `npm ci` first.
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL("..", import.meta.url));
let tsc;
try {
  tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
} catch {
  console.error(`@terminus-llm/client: no TypeScript compiler to build with: run \`npm ci\` in ${here} first`);
  process.exit(1);
}
for (const project of ["tsconfig.json", "tsconfig.producer.json"]) {
  const built = spawnSync(process.execPath, [tsc, "-p", project], { cwd: here, stdio: "inherit" });
  if (built.status !== 0) process.exit(built.status ?? 1);
}
