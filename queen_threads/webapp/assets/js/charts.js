// Time-series charts (uPlot, vendored in assets/vendor/uplot). Each chart keeps the sum of
// what it shows in data-total, so a test (or a person with devtools) can read the numbers
// behind the canvas.
import uPlot from "../vendor/uplot/uPlot.esm.js";
import { h, fill } from "./dom.js";
import { num } from "./format.js";
import { cssVar } from "./theme.js";

const HEIGHT = 170;
const FILL_ALPHA = 0.13;

/** "rgb(r, g, b)" (a resolved theme colour) at FILL_ALPHA, for the area under a line. */
function translucent(rgb) {
  return rgb.replace(/^rgb\((.*)\)$/, `rgba($1, ${FILL_ALPHA})`);
}

function options(width, series) {
  const text = cssVar("--muted");
  const grid = cssVar("--border");
  const axis = { stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
  return {
    width, height: HEIGHT,
    legend: { show: false },
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max * 1.15)] } },
    axes: [axis, { ...axis, size: 44, values: (u, ticks) => ticks.map((t) => num(t)) }],
    series: [{}, ...series.map(({ label, color }, i) => ({
      label, stroke: cssVar(color), width: 2, fill: i === 0 ? translucent(cssVar(color)) : undefined,
      points: { show: false },
    }))],
  };
}

/**
 * A chart in `container` of one or more `series` ([{label, color: "--series-n"}]).
 * update(xs, [ys, ...]): xs in seconds since the epoch, one ys array per series.
 * unavailable(message): a placeholder instead of the chart.
 */
export function seriesChart(container, { label, series }) {
  const total = h("span.total");
  const area = h("div");
  container.classList.add("chart");
  container.dataset.chart = label;
  fill(container, total, area);
  let plot = null;
  let data = [[], ...series.map(() => [])];

  function draw() {
    if (plot) plot.destroy();
    fill(area);
    plot = new uPlot(options(Math.max(200, container.clientWidth), series), data, area);
  }

  const resize = new ResizeObserver(() => {
    if (plot && container.clientWidth) plot.setSize({ width: container.clientWidth, height: HEIGHT });
  });
  resize.observe(container);
  const retheme = () => { if (plot) draw(); };
  window.addEventListener("queen:theme", retheme);

  return {
    update(xs, columns) {
      data = [xs, ...columns];
      const sum = columns.flat().reduce((a, b) => a + (b || 0), 0);
      container.dataset.total = String(sum);
      container.dataset.state = "ready";
      total.textContent = `${num(sum)} in range`;
      if (!plot || !area.isConnected || !area.firstChild) draw();
      else plot.setData(data);
    },
    unavailable(message) {
      if (plot) { plot.destroy(); plot = null; }
      container.dataset.state = "unavailable";
      delete container.dataset.total;
      total.textContent = "";
      fill(area, h("div.chart-unavailable", message));
    },
    destroy() {
      resize.disconnect();
      window.removeEventListener("queen:theme", retheme);
      if (plot) plot.destroy();
    },
  };
}
