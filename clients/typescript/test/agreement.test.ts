// The TypeScript LiveSession shows exactly what the Python one shows on the same recorded frame
// sequences (discards, retries, tool steps, failures, resumes with duplicates): the views Python
// made are committed beside the sequences (tests/agreement, `python -m tests.agreement.record`).
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { typescriptView } from "../tools/view.js";

const agreement = fileURLToPath(new URL("../../../../tests/agreement/", import.meta.url));
const sequences = readdirSync(agreement + "sequences").filter((f) => f.endsWith(".jsonl"));

test("there are recorded sequences", () => {
  assert.ok(sequences.length >= 5, `found ${sequences.length}`);
});

for (const file of sequences) {
  test(`the live view of ${file} is the Python one`, () => {
    const expected = JSON.parse(readFileSync(`${agreement}views/${file.replace(".jsonl", ".json")}`, "utf8"));
    assert.deepEqual(typescriptView(`${agreement}sequences/${file}`), expected);
  });
}
