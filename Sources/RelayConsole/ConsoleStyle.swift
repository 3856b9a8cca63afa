/// The console's style sheet (`/console/app.css`).
package enum ConsoleStyle {
    package static let css = #"""
        :root { --fg: #1d2330; --muted: #667085; --line: #d8dde6; --bg: #f6f7f9; --panel: #fff;
                --accent: #2f6fdf; --bad: #c23934; --good: #1e8a4c; font: 14px/1.45 system-ui, sans-serif; }
        * { box-sizing: border-box; }
        body { margin: 0; color: var(--fg); background: var(--bg); }
        header { display: flex; gap: 1rem; align-items: baseline; padding: .8rem 1.5rem; background: #1d2330; color: #fff; }
        header h1 { font-size: 1.2rem; margin: 0; }
        header .muted { color: #b8c0cc; }
        header button { margin-left: auto; }
        main, #login { padding: 1rem 1.5rem; }
        h2 { font-size: .95rem; margin: 0 0 .6rem; }
        .panel { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 1rem; margin-bottom: 1rem; overflow-x: auto; }
        .narrow { max-width: 28rem; margin: 2rem auto; }
        .grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(24rem, 1fr)); gap: 1rem; }
        .cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(10rem, 1fr)); gap: 1rem; margin-bottom: 1rem; }
        .card { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: .8rem 1rem; }
        .card .value { font-size: 1.6rem; font-weight: 600; }
        .card .label { color: var(--muted); }
        .card.bad .value { color: var(--bad); }
        .card.good .value { color: var(--good); }
        .muted { color: var(--muted); }
        .error { color: var(--bad); font-weight: 600; }
        .error:empty { display: none; }
        label { display: block; margin-bottom: .3rem; }
        input { font: inherit; padding: .4rem .5rem; border: 1px solid var(--line); border-radius: 4px; }
        #login input { width: 100%; margin-bottom: .8rem; }
        button { font: inherit; padding: .4rem .8rem; border: 1px solid var(--accent); background: var(--accent); color: #fff; border-radius: 4px; cursor: pointer; }
        button[disabled] { opacity: .5; cursor: default; }
        form.inline { display: flex; gap: .5rem; margin-bottom: .6rem; }
        form.inline input { flex: 1; }
        table { border-collapse: collapse; width: 100%; }
        th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
        th { color: var(--muted); font-weight: 500; }
        td.error-text { color: var(--bad); }
        .chips { list-style: none; padding: 0; margin: 0; display: flex; flex-wrap: wrap; gap: .4rem; }
        .chips li { background: #e8eefb; border-radius: 999px; padding: .1rem .6rem; }
        .frames { font-family: ui-monospace, monospace; font-size: 12px; max-height: 18rem; overflow-y: auto; padding-left: 1.5rem; }
        .frames li { border-bottom: 1px dotted var(--line); padding: .2rem 0; word-break: break-all; }
        .plot { width: 100%; height: 160px; }
        .plot .line { fill: none; stroke: var(--accent); stroke-width: 2; }
        .plot .axis { stroke: var(--line); }
        .plot text { fill: var(--muted); font-size: 11px; }
        .state-delivered, .state-acked { color: var(--good); }
        .state-dead { color: var(--bad); }
        .decision-pushed, .decision-read { color: var(--good); }
        .decision-dead, .decision-cancelled, .decision-retrying { color: var(--bad); }
        .trace, .attempts { margin: .2rem 0 .2rem 1rem; padding-left: 1rem; font-size: .9em; }
        .attempts { color: var(--muted); word-break: break-all; }
        button.link { background: none; border: none; color: var(--accent); padding: 0; text-decoration: underline; }
        """#
}
