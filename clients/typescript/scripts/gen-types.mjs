// src/contract.ts is docs/contract/contract.ts, which `terminus contract` generates from the
// published JSON Schema. `npm run gen` copies it; `--check` (run by `npm test`) exits 1 when the
// copy is stale, so the client's types never drift from the server's contract.
import { readFile, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";

const source = fileURLToPath(new URL("../../../docs/contract/contract.ts", import.meta.url));
const target = fileURLToPath(new URL("../src/contract.ts", import.meta.url));
const generated = await readFile(source, "utf8");

if (process.argv.includes("--check")) {
  const copy = await readFile(target, "utf8").catch(() => "");
  if (copy !== generated) {
    console.error("src/contract.ts differs from docs/contract/contract.ts: run `npm run gen`");
    process.exit(1);
  }
} else {
  await writeFile(target, generated);
  console.log(`wrote ${target}`);
}
