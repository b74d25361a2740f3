"""The UI's theme and stylesheet (system fonts only: nothing is fetched from other sites)."""

import gradio as gr

THEME = gr.themes.Soft(
    primary_hue="orange",
    font=[gr.themes.Font("system-ui"), gr.themes.Font("-apple-system"), "Segoe UI", "sans-serif"],
    font_mono=[gr.themes.Font("ui-monospace"), "SFMono-Regular", "Menlo", "monospace"],
)

CSS = """
.envhub-header { display: flex; align-items: baseline; gap: 1rem; flex-wrap: wrap; }
.envhub-header h1 { margin: 0; font-size: 1.6rem; }
.envhub-header p { margin: 0; color: var(--body-text-color-subdued); }
.env-grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(280px, 1fr)); gap: 12px; }
.env-card { display: block; border: 1px solid var(--border-color-primary); border-radius: 10px; padding: 12px 14px;
  text-decoration: none !important; color: inherit !important; background: var(--background-fill-primary);
  transition: box-shadow .15s, border-color .15s; cursor: pointer; }
.env-card:hover { border-color: var(--color-accent); box-shadow: 0 2px 10px rgba(0,0,0,.08); }
.env-card-head { display: flex; align-items: center; gap: 8px; }
.env-emoji { font-size: 1.5rem; }
.env-title { font-weight: 600; font-size: 1.05rem; }
.env-meta { font-size: .82rem; color: var(--body-text-color-subdued); margin: 4px 0; overflow-wrap: anywhere; }
.env-desc { font-size: .9rem; margin: 6px 0; min-height: 2.4em; }
.env-badges, .env-tags { display: flex; flex-wrap: wrap; gap: 4px; margin-top: 4px; }
.badge, .tag { font-size: .72rem; border-radius: 999px; padding: 1px 8px; white-space: nowrap; }
.tag { background: var(--background-fill-secondary); color: var(--body-text-color-subdued); }
.env-card .tag[data-tag] { cursor: pointer; }
.env-card .tag[data-tag]:hover { color: var(--color-accent); outline: 1px solid var(--color-accent); }
.badge-ok { background: #dcfce7; color: #166534; }
.badge-idle { background: #e5e7eb; color: #374151; }
.badge-busy { background: #fef9c3; color: #854d0e; }
.badge-bad { background: #fee2e2; color: #991b1b; }
.badge-info { background: #e0e7ff; color: #3730a3; }
#sync-status { gap: 6px; }
.banner { border-radius: 8px; padding: 8px 12px; }
.banner-bad { background: #fee2e2; color: #7f1d1d; }
.banner-busy { background: #fef9c3; color: #713f12; }
.banner-ok { background: #dcfce7; color: #14532d; }
.banner code { font-size: .85em; }
.empty-state .indexed { font-weight: 500; color: var(--body-text-color); }
.empty-state { text-align: center; padding: 3rem 1rem; color: var(--body-text-color-subdued); }
.empty-emoji { font-size: 2.5rem; }
#pager { align-items: center; justify-content: center; }
#page-label { text-align: center; }
.env-header h1 { margin-bottom: .2rem; }
.env-links a { margin-right: .2rem; }
.readme { max-width: 900px; }
.readme img { max-width: 100%; }
.readme pre { overflow-x: auto; background: var(--background-fill-secondary); padding: 10px 12px;
  border-radius: 8px; font-size: .85rem; }
.readme code { font-family: var(--font-mono); font-size: .88em; }
.readme table { border-collapse: collapse; }
.readme th, .readme td { border: 1px solid var(--border-color-primary); padding: 4px 8px; }
table.schema, table.kv, table.obs-fields { border-collapse: collapse; width: 100%; font-size: .88rem; border: none; }
table.schema, table.kv, table.obs-fields, table.my-endpoints, .endpoint-pool table,
table.schema tr, table.kv tr, table.obs-fields tr, table.my-endpoints tr, .endpoint-pool tr { border: none !important; }
table.schema th, table.schema td, table.kv th, table.kv td, table.obs-fields th, table.obs-fields td {
  border: solid rgba(127, 127, 127, .22) !important; border-width: 0 0 1px 0 !important; padding: 4px 8px;
  text-align: left;
  vertical-align: top; }
table.kv { table-layout: fixed; }
table.kv td { overflow-wrap: anywhere; }
table.kv th, table.obs-fields th { width: 35%; color: var(--body-text-color-subdued); font-weight: 500; }
.req { font-size: .7rem; color: #b45309; }
.muted { color: var(--body-text-color-subdued); }
.problem { color: #991b1b; }
.tool { border-left: 3px solid var(--color-accent); padding-left: 10px; margin: 10px 0; }
.observation { display: flex; flex-direction: column; gap: 8px; }
.obs-label { font-size: .78rem; font-weight: 600; color: var(--body-text-color-subdued); }
.obs-text { font-family: var(--font-mono); font-size: .95rem; line-height: 1.25; padding: 8px;
  background: var(--background-fill-secondary); border-radius: 6px; margin: 2px 0; white-space: pre; overflow-x: auto; }
.obs-image img { max-width: 100%; image-rendering: pixelated; border-radius: 6px; }
.obs-image { margin: 0; }
.obs-beside { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
.obs-as-text summary { font-size: .8rem; color: var(--body-text-color-subdued); cursor: pointer; }
.board { display: grid; gap: 2px; width: max-content; margin: 4px 0; }
.board .cell { display: block; border-radius: 3px; }
.board-maze .wall { background: #334155; }
.board-maze .floor { background: #e2e8f0; }
.board-maze .agent { background: #f97316; border-radius: 50%; }
.board-maze .exit { background: #16a34a; }
.board-maze .start { background: #93c5fd; }
.board-discs { background: #1d4ed8; padding: 6px; border-radius: 8px; gap: 4px; }
.board-discs .cell { border-radius: 50%; }
.board-discs .empty { background: #e2e8f0; }
.board-discs .one { background: #ef4444; }
.board-discs .two { background: #facc15; }
.board-lights { gap: 4px; }
.board-lights .lit { background: #fde047; box-shadow: 0 0 6px #facc15; }
.board-lights .unlit { background: #475569; }
.board-cells .v0 { background: #e2e8f0; } .board-cells .v1 { background: #334155; }
.board-cells .v2 { background: #16a34a; } .board-cells .v3 { background: #ef4444; }
.board-cells .v4 { background: #3b82f6; } .board-cells .v5 { background: #facc15; }
.board-cells .v6 { background: #a855f7; } .board-cells .v7 { background: #f97316; }
.board-chess { grid-template-columns: 18px repeat(8, 40px); grid-template-rows: repeat(8, 40px) 18px; gap: 0; }
.board-chess .sq { display: flex; align-items: center; justify-content: center; font-size: 30px; line-height: 1;
  color: #111; }
.board-chess .sq.light { background: #f0d9b5; }
.board-chess .sq.dark { background: #b58863; }
.board-chess .rank, .board-chess .file { display: flex; align-items: center; justify-content: center;
  font-size: .72rem; color: var(--body-text-color-subdued); }
.board-note { font-size: .82rem; color: var(--body-text-color-subdued); margin: 2px 0; }
.board-wordle { display: flex; flex-direction: column; gap: 4px; }
.board-wordle .tiles { display: flex; gap: 4px; }
.board-wordle .tile { width: 40px; height: 40px; display: flex; align-items: center; justify-content: center;
  font-weight: 700; font-size: 1.3rem; border: 2px solid #cbd5e1; color: #fff; }
.board-wordle .tile.green { background: #16a34a; border-color: #16a34a; }
.board-wordle .tile.yellow { background: #ca8a04; border-color: #ca8a04; }
.board-wordle .tile.gray { background: #6b7280; border-color: #6b7280; }
.board-wordle .keys { display: flex; flex-wrap: wrap; gap: 3px; margin-top: 6px; max-width: 330px; }
.board-wordle .key { min-width: 22px; padding: 2px 4px; border-radius: 4px; background: #e5e7eb; color: #111;
  text-align: center; font-weight: 600; font-size: .8rem; }
.board-wordle .key.green { background: #16a34a; color: #fff; }
.board-wordle .key.yellow { background: #ca8a04; color: #fff; }
.board-wordle .key.gray { background: #6b7280; color: #fff; }
svg.chart { display: block; max-width: 100%; height: auto; margin: 6px 0; font-size: 11px; }
svg.chart .axis { stroke: var(--border-color-primary); }
svg.chart .bar { fill: #f97316; }
svg.chart .bar.muted { fill: #94a3b8; }
svg.chart .whisker { stroke: #1e293b; stroke-width: 1.5; fill: none; }
svg.chart .series { fill: none; stroke-width: 2; }
svg.chart .label, svg.chart .value { fill: var(--body-text-color); }
svg.chart .tick { fill: var(--body-text-color-subdued); }
.stats { display: grid; grid-template-columns: repeat(4, 1fr); gap: 8px; }
.stat { background: var(--background-fill-secondary); border-radius: 8px; padding: 6px 10px; }
.stat span { display: block; font-size: .72rem; color: var(--body-text-color-subdued); }
.stat b { font-size: 1.15rem; }
.stats.done .stat[data-stat="done"] b { color: #166534; }
.legal-actions { display: flex; flex-wrap: wrap; gap: 6px; align-items: center; }
.legal-actions span { font-size: .8rem; color: var(--body-text-color-subdued); }
button.legal { border: 1px solid var(--border-color-primary); border-radius: 6px; padding: 2px 10px;
  background: var(--button-secondary-background-fill); cursor: pointer; font-family: var(--font-mono); }
button.legal:hover { border-color: var(--color-accent); }
.direct-controls { display: flex; flex-wrap: wrap; gap: 6px; }
button.direct { border: 1px solid var(--border-color-primary); border-radius: 6px; padding: 6px 14px; cursor: pointer;
  background: var(--button-secondary-background-fill); font-size: 1rem; }
button.direct:hover, .board .playable:hover { border-color: var(--color-accent); filter: brightness(1.1); }
.direct-hint { font-size: .82rem; color: var(--body-text-color-subdued); margin: 4px 0; }
.board button.cell { border: none; padding: 0; cursor: pointer; }
.board span.playable { cursor: pointer; }
.board button.drop { border: none; padding: 0; background: none; color: #fff; cursor: pointer; font-size: .8rem; }
button.direct:focus-visible, button.legal:focus-visible, .board button:focus-visible {
  outline: 3px solid var(--color-accent); outline-offset: 2px; }
.board-legend { display: flex; gap: 12px; align-items: center; font-size: .85rem; margin: 4px 0; }
.legend-entry { display: inline-flex; gap: 4px; align-items: center; }
.board-legend .swatch { display: inline-block; width: 14px; height: 14px; border-radius: 50%; }
.board-legend .one { background: #ef4444; } .board-legend .two { background: #facc15; }
.play-errors { color: #991b1b; }
a.download { display: inline-block; margin-top: 6px; font-weight: 600; }
.endpoint-status p { margin: 4px 0; }
.endpoint-pool table { font-size: 0.85em; margin: 6px 0; }
.endpoint-pool td, .endpoint-pool th { padding: 2px 8px; text-align: left; }
.endpoint-pool ul { margin: 4px 0; font-size: 0.85em; }
table.my-endpoints { border-collapse: collapse; width: 100%; font-size: .88rem; border: none; }
table.my-endpoints th, table.my-endpoints td { border: solid rgba(127, 127, 127, .22) !important;
  border-width: 0 0 1px 0 !important;
  padding: 6px 8px; text-align: left; vertical-align: middle; }
table.my-endpoints th { color: var(--body-text-color-subdued); font-weight: 500; white-space: nowrap; }
table.my-endpoints .endpoint-url code { overflow-wrap: anywhere; }
.row-actions { white-space: nowrap; }
button.row-action { border: 1px solid var(--border-color-primary); border-radius: 6px; padding: 2px 10px; margin: 2px;
  background: var(--button-secondary-background-fill); cursor: pointer; font-size: .82rem; }
button.row-action:hover { border-color: var(--color-accent); }
button.row-action.stop { color: #991b1b; }
.account { text-align: right; }
footer .show-api-divider { display: none; }
.history-wrap { max-height: 320px; overflow-y: auto; }
table.history { border-collapse: collapse; width: 100%; font-size: .85rem; border: none !important; }
table.history tr { border: none !important; }
table.history th, table.history td { border: solid rgba(127, 127, 127, .22) !important;
  border-width: 0 0 1px 0 !important; padding: 4px 8px; text-align: left; vertical-align: top;
  overflow-wrap: anywhere; }
table.history td:nth-child(2) { font-family: var(--font-mono); font-size: .8rem; }
#play-history th, #eval-results th, #play-history th *, #eval-results th * { word-break: keep-all;
  overflow-wrap: normal; hyphens: none; }
.account form.sign-out { display: inline; }
.account form.sign-out button { background: none; border: none; padding: 0; color: var(--link-text-color);
  text-decoration: underline; cursor: pointer; font: inherit; }
.publication p { margin: 4px 0; overflow-wrap: anywhere; }
"""
