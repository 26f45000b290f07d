package bench

// htmlCSS is the page's only style sheet. It must stay free of '<' and '&' (the page is XML).
const htmlCSS = `
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  color: #1f2937; background: #f9fafb; margin: 0 auto; padding: 24px 32px 48px; max-width: 1000px; }
h1 { font-size: 22px; margin: 0 0 8px; }
h2 { font-size: 17px; margin: 28px 0 10px; border-bottom: 1px solid #e5e7eb; padding-bottom: 4px; }
h3 { font-size: 13px; margin: 0 0 6px; color: #374151; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 8px 0 0; }
dl.meta dt { color: #6b7280; }
dl.meta dd { margin: 0; word-break: break-all; }
.k { color: #6b7280; }
.error { background: #fef2f2; border: 1px solid #fecaca; color: #991b1b; padding: 8px 12px; border-radius: 6px; }
.empty { background: #fffbeb; border: 1px solid #fde68a; padding: 10px 14px; border-radius: 6px; }
figure { margin: 0 0 18px; background: #fff; border: 1px solid #e5e7eb; border-radius: 8px; padding: 10px 12px 4px; }
figcaption { font-weight: 600; margin-bottom: 2px; }
svg.plot { width: 100%; height: auto; display: block; }
svg.plot text { font: 11px system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; fill: #4b5563; }
svg.plot text.label { fill: #374151; }
svg.plot .grid { stroke: #e5e7eb; stroke-width: 1; }
svg.plot .tick, svg.plot .frame { stroke: #9ca3af; stroke-width: 1; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(290px, 1fr)); gap: 12px; }
.card, .wide { background: #fff; border: 1px solid #e5e7eb; border-radius: 8px; padding: 10px 12px; }
.wide { margin-top: 12px; overflow-x: auto; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
table.kv { width: 100%; }
table.kv th { text-align: left; font-weight: normal; color: #4b5563; padding: 2px 12px 2px 0;
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; }
table.kv td { text-align: right; padding: 2px 0; word-break: break-all; }
table.rows { background: #fff; }
table.rows th, table.rows td { padding: 3px 10px; border-bottom: 1px solid #f3f4f6; text-align: right; }
table.rows thead th { font-weight: 600; color: #374151; border-bottom: 1px solid #d1d5db;
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px; }
table.rows tbody th { text-align: left; font-weight: normal; }
table.rows tr.group th { text-align: center; border-bottom: 1px solid #e5e7eb; color: #6b7280; }
.unit, .none { color: #6b7280; }
.false { color: #b45309; }
details summary { cursor: pointer; font-weight: 600; margin: 24px 0 8px; }
footer { margin-top: 36px; color: #9ca3af; font-size: 12px; }
`
