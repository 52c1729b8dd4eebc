(function(){
const doc = JSON.parse(document.getElementById('timeline-data').textContent);
const tip = document.getElementById('tip'), details = document.getElementById('details');
const NS = 'http://www.w3.org/2000/svg', ROW = 16, LABEL = 230, HEAD = 34;
function el(name, attrs, parent){const e=document.createElementNS(NS,name);
  for(const k in attrs)e.setAttribute(k,attrs[k]);if(parent)parent.appendChild(e);
  return e;}
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
  const services = new Set(w.generations.map(g=>g.service).filter(s=>s)); // several: name each generation's service
  function draw(){
    svgBox.textContent='';
    const width = Math.max(600, (svgBox.clientWidth||1000) - 20) * zoom, plot = width - LABEL - 10;
    const x = v => LABEL + (v - t0) / Math.max(1, t1 - t0) * plot;
    const height = HEAD + (rows.length + 1) * ROW + 10;
    const svg = el('svg', {width: width, height: height, role: 'img'}, svgBox);
    const ticks = Math.max(4, Math.round(plot / 110));
    for(let i=0;i<=ticks;i++){const v=t0+(t1-t0)*i/ticks, px=x(v);
      el('line',{x1:px,x2:px,y1:HEAD-6,y2:height,class:'tick'},svg);
      const lab=el('text',{x:px+2,y:HEAD-10,class:'ticklabel'},svg);
         lab.textContent=new Date(v).toISOString().substr(11,12);
        }
    if(w.deploy){el('rect',{x:x(t(w.deploy.start)),y:HEAD-4,width:Math.max(1,x(t(w.deploy.end))-x(t(w.deploy.start))),height:height-HEAD,class:'window'},svg);
      }
    if(w.overlap){el('rect',{x:x(t(w.overlap.start)),y:HEAD-4,width:Math.max(1,x(t(w.overlap.end))-x(t(w.overlap.start))),height:height-HEAD,class:'overlap'},svg);
      }
    rows.forEach(function(r, i){
      const y = HEAD + i * ROW;
      if(r.gen){const g=el('text',{x:4,y:y+12,class:'gen'},svg);
         g.textContent=(services.size>1&&r.gen.service?r.gen.service+' ':'')+(r.gen.generation||'unknown generation')+' ('+r.gen.workers.length+' worker'+(r.gen.workers.length===1?'':'s')+(r.gen.inferred?', inferred from '+r.gen.source.replace(/_/g,' '):'')+')';
         return;}
      const k = r.worker; const lab=el('text',{x:12,y:y+12,class:'label'},svg); lab.textContent=k.worker;
      const a=x(Math.max(t0,t(k.start))), b=x(Math.min(t1,t(k.end||k.last_seen)));
      if(b>a) el('rect',{x:a,y:y+6,width:b-a,height:4,class:'life'},svg);
      k.executions.slice().sort((p,q)=>(p.duplicate||p.state==='interrupted')-(q.duplicate||q.state==='interrupted')).forEach(function(e){
        const ea=x(Math.max(t0,t(e.start))), eb=x(Math.min(t1,t(e.end)));
        const cls='exec'+(e.duplicate?' dup':'')+(e.state==='interrupted'?' cut':'')+(e.state==='open'?' open':'')+(e.state==='failed'?' failed':'')+(e.state==='guarded'?' guarded':'');
        const bar=el('rect',{x:ea,y:y+2,width:Math.max(2,eb-ea),height:ROW-5,class:cls,'data-exec':e.id},svg);
        bar.addEventListener('mousemove',ev=>{tip.textContent=describe(e);
          tip.style.display='block';tip.style.left=(ev.clientX+14)+'px';
          tip.style.top=(ev.clientY+10)+'px';});
        bar.addEventListener('mouseleave',()=>{tip.style.display='none';});
        bar.addEventListener('click',()=>{svgBox.querySelectorAll('.sel').forEach(s=>s.classList.remove('sel'));
          bar.classList.add('sel');details.textContent=describe(e);
          });
      });
      if(k.stop){const p=x(t(k.stop)); if(p>=LABEL) el('line',{x1:p,x2:p,y1:y,y2:y+ROW-1,class:'stop'},svg);}
      if(k.end && k.end_kind!=='running'){const p=x(t(k.end));
         if(p>=LABEL&&p<=width) el('line',{x1:p,x2:p,y1:y,y2:y+ROW-1,class:(k.end_kind==='exited'?'exit':'kill')},svg);
        }
    });
  }
  host.querySelector('.zin').onclick=()=>{zoom*=1.5;draw();};
  host.querySelector('.zout').onclick=()=>{zoom=Math.max(1,zoom/1.5);draw();};
  host.querySelector('.zreset').onclick=()=>{zoom=1;draw();};
  svgBox.addEventListener('wheel',ev=>{if(!ev.ctrlKey)return;
    ev.preventDefault();zoom=Math.max(1,zoom*(ev.deltaY<0?1.25:0.8));
    draw();},{passive:false});
  draw();
});
})();
