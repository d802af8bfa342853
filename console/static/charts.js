// Small canvas charts for the console: time-series lines and horizontal bars. No library, nothing fetched.
"use strict";

const PALETTE = ["#2f6fdf", "#e5484d", "#f5a524", "#12a594", "#8e4ec6", "#e93d82", "#5b6b7c", "#0090ff"];

function colorOf(i) { return PALETTE[i % PALETTE.length]; }

function formatNumber(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  const a = Math.abs(v);
  if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (a >= 1e3) return (v / 1e3).toFixed(1) + "k";
  if (a >= 10 || Number.isInteger(v)) return v.toFixed(0);
  return v.toFixed(2);
}

// The value axis: four equal steps of 1, 2 or 5 times a power of ten reaching the largest value (whole steps for
// whole-number series such as a lag in records), so that every tick label differs, even when all values are 0.
function axisScale(values) {
  const max = Math.max(0, ...values);
  let raw = max / 4;
  if (values.every(Number.isInteger)) raw = Math.max(raw, 1);
  if (!(raw > 0)) raw = 1;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map(m => m * mag).find(s => s >= raw * (1 - 1e-12));
  const decimals = step >= 1 ? 0 : Math.ceil(-Math.log10(step) - 1e-9);
  const label = v => (step >= 1 ? formatNumber(v) : v.toFixed(decimals));
  return { top: step * 4, ticks: [0, 1, 2, 3, 4].map(i => ({ value: step * i, label: label(step * i) })) };
}

function prepare(canvas) {
  const ctx = canvas.getContext("2d");
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  ctx.font = "11px system-ui, sans-serif";
  ctx.textBaseline = "middle";
  return ctx;
}

// series: [{name, points: [[t, v|null], ...]}]; draws lines over a shared time axis with a legend.
function lineChart(canvas, series, unit) {
  const ctx = prepare(canvas);
  const W = canvas.width, H = canvas.height, left = 52, right = 8, top = 22, bottom = 20;
  const all = series.flatMap(s => s.points.filter(p => p[1] !== null));
  if (all.length === 0) {
    ctx.fillStyle = "#889";
    ctx.fillText("no data yet", W / 2 - 30, H / 2);
    return 0;
  }
  const t0 = Math.min(...all.map(p => p[0])), t1 = Math.max(...all.map(p => p[0]));
  const scale = axisScale(all.map(p => p[1]));
  const x = t => left + (t1 === t0 ? 0 : (t - t0) / (t1 - t0)) * (W - left - right);
  const y = v => top + (1 - v / scale.top) * (H - top - bottom);
  ctx.strokeStyle = "#e4e6eb";
  ctx.fillStyle = "#667";
  for (const tick of scale.ticks) {
    ctx.beginPath(); ctx.moveTo(left, y(tick.value)); ctx.lineTo(W - right, y(tick.value)); ctx.stroke();
    ctx.fillText(tick.label, 4, y(tick.value));
  }
  ctx.fillText(`${Math.round((t1 - t0) / 1000)} s`, W - right - 30, H - 8);
  let legendX = left;
  series.forEach((s, i) => {
    ctx.strokeStyle = colorOf(i);
    ctx.lineWidth = 2;
    ctx.beginPath();
    let pen = false;
    for (const [t, v] of s.points) {
      if (v === null) { pen = false; continue; }
      if (pen) ctx.lineTo(x(t), y(v)); else ctx.moveTo(x(t), y(v));
      pen = true;
    }
    ctx.stroke();
    ctx.lineWidth = 1;
    const last = s.points.length ? s.points[s.points.length - 1][1] : null;
    const label = `${s.name} ${formatNumber(last)}${unit || ""}`;
    ctx.fillStyle = colorOf(i);
    ctx.fillRect(legendX, 6, 10, 10);
    ctx.fillStyle = "#1d2330";
    ctx.fillText(label, legendX + 14, 11);
    legendX += ctx.measureText(label).width + 28;
  });
  return all.length;
}

// bars: [{label, value}]; horizontal bars, largest first.
function barChart(canvas, bars) {
  const ctx = prepare(canvas);
  const W = canvas.width, H = canvas.height;
  if (bars.length === 0) {
    ctx.fillStyle = "#889";
    ctx.fillText("no data yet", W / 2 - 30, H / 2);
    return 0;
  }
  const shown = bars.slice().sort((a, b) => b.value - a.value).slice(0, 12);
  const max = Math.max(...shown.map(b => b.value), 1);
  const labelW = 170, rowH = Math.min(20, (H - 4) / shown.length);
  shown.forEach((b, i) => {
    const yy = 2 + i * rowH;
    ctx.fillStyle = "#1d2330";
    ctx.fillText(b.label.slice(0, 28), 4, yy + rowH / 2);
    ctx.fillStyle = colorOf(i);
    const w = (W - labelW - 60) * b.value / max;
    ctx.fillRect(labelW, yy + 2, Math.max(1, w), rowH - 4);
    ctx.fillStyle = "#1d2330";
    ctx.fillText(formatNumber(b.value), labelW + w + 6, yy + rowH / 2);
  });
  return shown.length;
}

window.HeadwaterCharts = { lineChart, barChart, formatNumber, axisScale };
