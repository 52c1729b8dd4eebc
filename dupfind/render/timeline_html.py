"""One self-contained HTML timeline (inline CSS and script, no network): zoom, scroll, hover and click details."""

from __future__ import annotations

import html

import orjson

_CSS = """
body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px;margin:0 0 4px} h2{font-size:15px;margin:18px 0 4px}
.meta{color:#555} table.sum{border-collapse:collapse;margin:6px 0} .sum td,.sum th{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left}
.controls{margin:6px 0} .controls button{margin-right:4px}
.scroll{overflow-x:auto;overflow-y:auto;max-height:75vh;border:1px solid #ccc;position:relative}
svg text{font:11px system-ui,sans-serif} .label{fill:#333} .gen{font-weight:bold;fill:#000}
.life{fill:#e6e6e6} .exec{fill:#3a9d4a} .exec.dup{fill:#d62728} .exec.cut{fill:#b04fc6} .exec.open{fill:#8fbf8f}
.exec.failed{fill:#e6a23c} .exec.guarded{fill:#4a7bd0} .exec:hover,.exec.sel{stroke:#000;stroke-width:1.5}
.stop{stroke:#e0a800;stroke-width:2} .kill{stroke:#d62728;stroke-width:2} .exit{stroke:#1f9bb4;stroke-width:2}
.window{fill:#1f77b4;opacity:.10} .overlap{fill:#1f77b4;opacity:.22} .tick{stroke:#ccc} .ticklabel{fill:#666}
#tip{position:fixed;pointer-events:none;background:#fff;border:1px solid #999;padding:6px 8px;font:12px monospace;
white-space:pre;display:none;box-shadow:0 2px 6px rgba(0,0,0,.2);z-index:9}
#details{font:12px monospace;white-space:pre-wrap;background:#f7f7f7;border:1px solid #ddd;padding:8px;min-height:2em}
.legend span{display:inline-block;margin-right:12px} .sw{display:inline-block;width:12px;height:10px;margin-right:4px;vertical-align:middle}
"""

_SCRIPT = r"""
(function(){
const doc = JSON.parse(document.getElementById('timeline-data').textContent);
const tip = document.getElementById('tip'), details = document.getElementById('details');
const NS = 'http://www.w3.org/2000/svg', ROW = 16, LABEL = 230, HEAD = 34;
function el(name, attrs, parent){const e=document.createElementNS(NS,name);for(const k in attrs)e.setAttribute(k,attrs[k]);if(parent)parent.appendChild(e);return e;}
function t(s){return s?Date.parse(s):null;}
function describe(e){
  const ids = Object.entries(e.ids||{}).map(([k,v])=>k+': '+v.join(', ')).join('\n');
  return 'execution '+e.id+' ('+e.state+(e.duplicate?', duplicated action':'')+(e.repeat?', repeated the side effect':'')+
    (e.after_stop?', taken after the stop signal':'')+')\n'+ids+'\nworker: '+e.process+'\nattempt: '+(e.attempt==null?'-':e.attempt)+
    '\n'+e.start+' -> '+e.end+(e.side_effect_at?'\nside effect at '+e.side_effect_at:'')+'\nevidence: '+e.where;
}
doc.windows.forEach(function(w, wi){
  const host = document.getElementById('tl-'+wi); const svgBox = host.querySelector('.scroll');
  const t0 = t(w.start), t1 = t(w.end); let zoom = 1;
  const rows = []; w.generations.forEach(g=>{rows.push({gen:g}); g.workers.forEach(k=>rows.push({worker:k}));});
  function draw(){
    svgBox.textContent='';
    const width = Math.max(600, (svgBox.clientWidth||1000) - 20) * zoom, plot = width - LABEL - 10;
    const x = v => LABEL + (v - t0) / Math.max(1, t1 - t0) * plot;
    const height = HEAD + (rows.length + 1) * ROW + 10;
    const svg = el('svg', {width: width, height: height, role: 'img'}, svgBox);
    const ticks = Math.max(4, Math.round(plot / 110));
    for(let i=0;i<=ticks;i++){const v=t0+(t1-t0)*i/ticks, px=x(v);
      el('line',{x1:px,x2:px,y1:HEAD-6,y2:height,class:'tick'},svg);
      const lab=el('text',{x:px+2,y:HEAD-10,class:'ticklabel'},svg); lab.textContent=new Date(v).toISOString().substr(11,12);}
    if(w.deploy){el('rect',{x:x(t(w.deploy.start)),y:HEAD-4,width:Math.max(1,x(t(w.deploy.end))-x(t(w.deploy.start))),height:height-HEAD,class:'window'},svg);}
    if(w.overlap){el('rect',{x:x(t(w.overlap.start)),y:HEAD-4,width:Math.max(1,x(t(w.overlap.end))-x(t(w.overlap.start))),height:height-HEAD,class:'overlap'},svg);}
    rows.forEach(function(r, i){
      const y = HEAD + i * ROW;
      if(r.gen){const g=el('text',{x:4,y:y+12,class:'gen'},svg); g.textContent=(r.gen.generation||'unknown generation')+' ('+r.gen.workers.length+' workers'+(r.gen.inferred?', inferred from '+r.gen.source.replace(/_/g,' '):'')+')'; return;}
      const k = r.worker; const lab=el('text',{x:12,y:y+12,class:'label'},svg); lab.textContent=k.worker;
      const a=x(Math.max(t0,t(k.start))), b=x(Math.min(t1,t(k.end||k.last_seen)));
      if(b>a) el('rect',{x:a,y:y+6,width:b-a,height:4,class:'life'},svg);
      k.executions.slice().sort((p,q)=>(p.duplicate||p.state==='interrupted')-(q.duplicate||q.state==='interrupted')).forEach(function(e){
        const ea=x(Math.max(t0,t(e.start))), eb=x(Math.min(t1,t(e.end)));
        const cls='exec'+(e.duplicate?' dup':'')+(e.state==='interrupted'?' cut':'')+(e.state==='open'?' open':'')+(e.state==='failed'?' failed':'')+(e.state==='guarded'?' guarded':'');
        const bar=el('rect',{x:ea,y:y+2,width:Math.max(2,eb-ea),height:ROW-5,class:cls,'data-exec':e.id},svg);
        bar.addEventListener('mousemove',ev=>{tip.textContent=describe(e);tip.style.display='block';tip.style.left=(ev.clientX+14)+'px';tip.style.top=(ev.clientY+10)+'px';});
        bar.addEventListener('mouseleave',()=>{tip.style.display='none';});
        bar.addEventListener('click',()=>{svgBox.querySelectorAll('.sel').forEach(s=>s.classList.remove('sel'));bar.classList.add('sel');details.textContent=describe(e);});
      });
      if(k.stop){const p=x(t(k.stop)); if(p>=LABEL) el('line',{x1:p,x2:p,y1:y,y2:y+ROW-1,class:'stop'},svg);}
      if(k.end && k.end_kind!=='running'){const p=x(t(k.end)); if(p>=LABEL&&p<=width) el('line',{x1:p,x2:p,y1:y,y2:y+ROW-1,class:(k.end_kind==='exited'?'exit':'kill')},svg);}
    });
  }
  host.querySelector('.zin').onclick=()=>{zoom*=1.5;draw();};
  host.querySelector('.zout').onclick=()=>{zoom=Math.max(1,zoom/1.5);draw();};
  host.querySelector('.zreset').onclick=()=>{zoom=1;draw();};
  svgBox.addEventListener('wheel',ev=>{if(!ev.ctrlKey)return;ev.preventDefault();zoom=Math.max(1,zoom*(ev.deltaY<0?1.25:0.8));draw();},{passive:false});
  draw();
});
})();
"""

_LEGEND = (
    ("#3a9d4a", "execution"), ("#d62728", "duplicated action"), ("#b04fc6", "cut short"), ("#e6a23c", "failed"),
    ("#4a7bd0", "stopped by a guard"), ("#e0a800", "stop signal"), ("#d62728", "killed / went silent"),
    ("#1f9bb4", "exited"), ("#1f77b4", "deploy window (darker: generations overlap)"),
)


def _json_island(document: dict) -> str:
    """The data as JSON that cannot close its script element or open a comment."""
    text = orjson.dumps(document).decode()
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _summary_table(window: dict) -> str:
    s = window["summary"]
    rows = [
        ("window (UTC)", f"{window['start']} → {window['end']}"),
        ("generations", s["generations"]), ("workers", s["workers"]), ("executions", s["executions"]),
        ("generations consumed together", f"{s['overlap_s']:.0f} s" if s["overlap_s"] else "-"),
        ("taken after a stop signal", s["taken_after_stop"]), ("cut short", s["interrupted"]),
        ("duplicated side effects in this window", s["duplicates_in_window"]),
        ("duplicated side effects outside it", s["duplicates_outside_window"]),
    ]
    body = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in rows)
    return f'<table class="sum">{body}</table>'


def render_html(document: dict) -> str:
    windows = []
    for i, window in enumerate(document["windows"]):
        headline = window["summary"].get("concentration")
        windows.append(
            f'<section id="tl-{i}"><h2>{html.escape(window["title"])}</h2>'
            + (f"<p><b>{html.escape(headline)}</b></p>" if headline else "")
            + _summary_table(window)
            + '<div class="controls"><button class="zin">zoom in</button><button class="zout">zoom out</button>'
            '<button class="zreset">reset</button> <span class="meta">ctrl + wheel zooms; scroll sideways to pan; '
            "hover or click a bar for its ids, worker, attempt and evidence line</span></div>"
            '<div class="scroll"></div></section>'
        )
    legend = "".join(f'<span><i class="sw" style="background:{c}"></i>{html.escape(t)}</span>' for c, t in _LEGEND)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">"
        "<title>dupfind timeline</title>"
        f"<style>{_CSS}</style></head><body>"
        f"<h1>dupfind timeline</h1><p class=\"meta\">verdict: {html.escape(document['verdict'])}</p>"
        f'<div class="legend">{legend}</div>'
        + "".join(windows)
        + '<h2>Selected execution</h2><div id="details">click an execution bar</div><div id="tip"></div>'
        + f'<script id="timeline-data" type="application/json">{_json_island(document)}</script>'
        + f"<script>{_SCRIPT}</script>"
        + "<noscript>The timeline drawing needs JavaScript; the data is embedded in this file as JSON.</noscript>"
        "</body></html>\n"
    )
