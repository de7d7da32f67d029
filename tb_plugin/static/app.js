// Lists the runs the server found, with load progress and errors. Everything from the
// server is inserted as text, never as HTML.
const RUNS_URL = new URL('./runs', import.meta.url);

function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function renderRuns(payload) {
  const body = document.querySelector('#runs tbody');
  body.replaceChildren();
  for (const run of payload.runs) {
    const row = body.insertRow();
    cell(row, run.name);
    cell(row, run.workers.join(', '));
    cell(row, String(run.spans));
    cell(row, `${run.loaded} / ${run.files}${run.loading ? ' (loading…)' : ''}`);
    cell(row, run.errors.map((e) => `${e.worker} span ${e.span}: ${e.reason}`).join('\n'), run.errors.length ? 'error' : '');
  }
  const status = document.getElementById('status');
  status.textContent = payload.scan_error || `${payload.runs.length} run(s)`;
  status.className = payload.scan_error ? 'error' : '';
  document.body.dataset.ready = 'true';
}

async function refresh() {
  try {
    const response = await fetch(RUNS_URL);
    renderRuns(await response.json());
  } catch (err) {
    document.getElementById('status').textContent = `Cannot reach the server: ${err}`;
  }
}

refresh();
setInterval(refresh, 5000);
