/** Whether cursor (a Redis stream id, `<ms>-<seq>`) `a` comes after `b`. */
export function cursorAfter(a: string, b: string): boolean {
  const [ams, aseq] = parts(a);
  const [bms, bseq] = parts(b);
  return ams > bms || (ams === bms && aseq > bseq);
}

function parts(cursor: string): [bigint, bigint] {
  const [ms = "0", seq = "0"] = cursor.split("-", 2);
  return [BigInt(ms), BigInt(seq || "0")];
}
