/** The board page's CSS. */
export const BOARD_STYLE = String.raw`
:root {
  --bg: #0f1217; --panel: #171b22; --card: #1e232c; --card-hover: #252b36; --line: #2a303b;
  --text: #e6e9ef; --muted: #8b93a3; --accent: #5aa9ff; --danger: #e5484d; --ok: #3fb950; --warn: #d29922;
  font: 13px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color-scheme: dark;
}
* { box-sizing: border-box; }
[hidden] { display: none !important; }
body { margin: 0; background: var(--bg); color: var(--text); height: 100vh; display: flex; flex-direction: column; }
header { display: flex; align-items: center; gap: 14px; padding: 8px 14px; border-bottom: 1px solid var(--line); background: var(--panel); }
header h1 { font-size: 16px; margin: 0; letter-spacing: .02em; }
.spacer { flex: 1; }
.muted { color: var(--muted); }
.conn::before { content: ""; display: inline-block; width: 8px; height: 8px; border-radius: 50%; margin-right: 6px; background: var(--warn); vertical-align: middle; }
.conn[data-conn="live"]::before { background: var(--ok); }
.conn[data-conn="closed"]::before { background: var(--danger); }
.breakers { padding: 2px 8px; border-radius: 10px; border: 1px solid var(--line); }
.breakers[data-open="true"] { border-color: var(--danger); color: #ffb4b6; }
button { font: inherit; color: var(--text); background: #2a3140; border: 1px solid #3a4354; border-radius: 5px; padding: 3px 10px; cursor: pointer; }
button:hover:not(:disabled) { background: #343d4f; }
button:disabled { opacity: .5; cursor: default; }
button.danger { background: #4a1d21; border-color: #7a2a30; }
button.danger:hover:not(:disabled) { background: #62252b; }
button.ok { background: #17391f; border-color: #2a6b38; }
button.ok:hover:not(:disabled) { background: #1f4d2a; }
main { flex: 1; display: grid; grid-template-columns: minmax(0, 1fr) 380px; min-height: 0; }
.board { display: grid; grid-template-columns: repeat(8, minmax(128px, 1fr)); gap: 8px; padding: 10px; overflow: auto; }
.column { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; display: flex; flex-direction: column; min-height: 0; }
.column h2 { font-size: 12px; text-transform: uppercase; letter-spacing: .06em; margin: 0; padding: 8px 10px; border-bottom: 1px solid var(--line); display: flex; justify-content: space-between; border-top: 3px solid var(--state, var(--muted)); border-radius: 8px 8px 0 0; }
.column h2 { align-items: center; gap: 4px; }
.column h2 > span:first-child { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.column h2 .count { flex: none; }
.column .cards { padding: 6px; display: flex; flex-direction: column; gap: 6px; overflow-y: auto; }
.card { background: var(--card); border: 1px solid var(--line); border-left: 3px solid var(--state, var(--muted)); border-radius: 6px; padding: 6px 8px; cursor: pointer; overflow-wrap: anywhere; }
.card:hover, .card:focus { background: var(--card-hover); outline: none; }
.card.selected { border-color: var(--accent); box-shadow: 0 0 0 1px var(--accent); }
.card .id { color: var(--muted); font-size: 11px; }
.card .title { margin: 2px 0; }
.card .meta { color: var(--muted); font-size: 11px; }
.more { color: var(--muted); font-size: 11px; text-align: center; padding: 4px; }
[data-state="pending"] { --state: #8b93a3; } [data-state="claimed"] { --state: #7aa2f7; } [data-state="in_progress"] { --state: #5aa9ff; }
[data-state="waiting"] { --state: #d29922; } [data-state="review"] { --state: #bc8cff; } [data-state="completed"] { --state: #3fb950; }
[data-state="failed"] { --state: #e5484d; } [data-state="cancelled"] { --state: #6e7681; }
aside { border-left: 1px solid var(--line); background: var(--panel); overflow-y: auto; }
.panel { padding: 10px 12px; border-bottom: 1px solid var(--line); }
.panel h2 { font-size: 13px; margin: 0 0 8px; display: flex; align-items: center; gap: 8px; }
.count { background: #2a3140; border-radius: 10px; padding: 0 7px; font-size: 11px; }
.count[data-n]:not([data-n="0"]) { background: var(--warn); color: #111; }
.approval { background: var(--card); border: 1px solid #5a4a1a; border-radius: 6px; padding: 8px; margin-bottom: 8px; overflow-wrap: anywhere; }
.approval .tool { font-weight: 600; }
.approval .actions, .detail-actions { display: flex; gap: 6px; margin-top: 6px; }
pre { background: #0b0e13; border: 1px solid var(--line); border-radius: 4px; padding: 6px; margin: 4px 0; white-space: pre-wrap; overflow-wrap: anywhere; max-height: 220px; overflow: auto; font-size: 11px; }
.badge { display: inline-block; border-radius: 10px; padding: 0 8px; font-size: 11px; background: var(--state, #2a3140); color: #0b0e13; font-weight: 600; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 2px 10px; margin: 6px 0; }
dl.meta dt { color: var(--muted); } dl.meta dd { margin: 0; overflow-wrap: anywhere; }
h3 { font-size: 12px; margin: 12px 0 4px; text-transform: uppercase; letter-spacing: .05em; color: var(--muted); }
.detail-title { font-size: 14px; font-weight: 600; overflow-wrap: anywhere; }
table.budget { width: 100%; border-collapse: collapse; font-size: 12px; }
table.budget td { padding: 2px 4px; border-bottom: 1px solid var(--line); }
.bar { height: 5px; background: #2a3140; border-radius: 3px; overflow: hidden; min-width: 60px; }
.bar > div { height: 100%; background: var(--accent); }
.bar > div.high { background: var(--danger); }
ol.timeline { list-style: none; padding: 0; margin: 0; }
ol.timeline li { border-left: 2px solid var(--line); padding: 2px 0 6px 10px; position: relative; overflow-wrap: anywhere; }
ol.timeline li::before { content: ""; position: absolute; left: -5px; top: 7px; width: 8px; height: 8px; border-radius: 50%; background: var(--muted); }
ol.timeline li[data-status="ok"]::before, ol.timeline li[data-status="succeeded"]::before { background: var(--ok); }
ol.timeline li[data-status="failed"]::before, ol.timeline li[data-status="error"]::before, ol.timeline li[data-status="rejected"]::before { background: var(--danger); }
ol.timeline li[data-status="pending"]::before, ol.timeline li[data-status="started"]::before, ol.timeline li[data-status="waiting_approval"]::before { background: var(--warn); }
.step-head { display: flex; gap: 6px; flex-wrap: wrap; align-items: baseline; }
.step-kind { color: var(--muted); font-size: 11px; }
.step-tool { font-weight: 600; }
.step-error { color: #ffb4b6; font-size: 12px; }
.run-tabs { display: flex; gap: 4px; flex-wrap: wrap; }
.run-tabs button[aria-pressed="true"] { border-color: var(--accent); }
#toast { position: fixed; bottom: 14px; left: 50%; transform: translateX(-50%); background: #4a1d21; border: 1px solid #7a2a30; padding: 8px 14px; border-radius: 6px; max-width: 70vw; overflow-wrap: anywhere; }
#toast[data-kind="info"] { background: #17391f; border-color: #2a6b38; }
img.screen { display: block; width: 100%; border: 1px solid var(--line); border-radius: 4px; }
.signin { position: fixed; inset: 0; background: rgba(8, 10, 14, .85); display: flex; align-items: center; justify-content: center; z-index: 10; }
.signin form { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 18px 20px; width: 360px; display: flex; flex-direction: column; gap: 10px; }
.signin h2 { margin: 0; font-size: 15px; }
.signin input { font: inherit; color: var(--text); background: var(--card); border: 1px solid #3a4354; border-radius: 5px; padding: 6px 8px; }
.signin .error { color: #ffb4b6; margin: 0; }
`;
