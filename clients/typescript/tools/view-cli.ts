// `node build/tools/view-cli.js SEQUENCE.jsonl`: prints the TypeScript LiveSession's view of a
// recorded sequence as JSON (tests/unit/test_live_agreement.py compares it with Python's).
import { typescriptView } from "./view.js";

const path = process.argv[2];
if (path === undefined) {
  console.error("usage: view-cli SEQUENCE.jsonl");
  process.exit(2);
}
process.stdout.write(`${JSON.stringify(typescriptView(path))}\n`);
