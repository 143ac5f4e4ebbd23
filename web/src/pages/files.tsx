import { useEffect, useState } from 'preact/hooks';
import { api, download, enc, encPath, events, upload } from '../api';
import type { Schema } from '../api-types';
import { Alert, Fields, Table, Time, useAction, useLoad } from '../ui';

const parentOf = (path: string) => path.replace(/\/[^/]+\/?$/, '') || '/';
const join = (dir: string, file: string) => `${dir.replace(/\/+$/, '')}/${file}`;

/**
 * Reloads the listing whenever something in `dir` is created, modified or deleted: a
 * non-recursive watch (GET /fs/watch), open while `active` (the directory was listed). Returns
 * whether the watch ended by itself (the directory was deleted, the sandbox stopped or went):
 * nothing is asked then, as a request for what is gone would only be refused; `again` lists
 * and watches anew.
 */
function useWatch(name: string, dir: string, active: boolean, reload: () => void): { ended: boolean; again: () => void } {
  const [ended, setEnded] = useState(false);
  const [round, setRound] = useState(0);
  useEffect(() => {
    setEnded(false);
    if (!active) return;
    const abort = new AbortController();
    void (async () => {
      try {
        for await (const event of events(`/sandboxes/${enc(name)}/fs/watch?path=${enc(dir)}&recursive=false`, abort.signal)) {
          // `error`: the watch failed (its sandbox went, say) or misses events; the stream ends or goes on, the listing stays.
          if (event.event !== 'ready' && event.event !== 'error') reload();
        }
        if (!abort.signal.aborted) setEnded(true);
      } catch {
        // Leaving the directory aborts the watch; a refused one (too many watches) leaves the listing as it is.
      }
    })();
    return () => abort.abort();
  }, [name, dir, active, reload, round]);
  return { ended, again: () => (reload(), setRound((n) => n + 1)) };
}

/**
 * One directory of the sandbox through the directory views (GET /fs, /fs/stat, /fs/watch):
 * entries with their size, mode and time, followed live; a typed path is looked up first (a
 * file opens its directory with the file shown); upload and download of raw bytes.
 */
export function Files({ name }: { name: string }) {
  const [dir, setDir] = useState('/workspace');
  const [shown, setShown] = useState<Schema<'FsStat'>>();
  const [error, run] = useAction();
  const base = `/sandboxes/${enc(name)}`;
  const listing = useLoad(async () => ({ dir, ...(await api('listDirectory', 'GET', `${base}/fs?path=${enc(dir)}`)) }), [name, dir]);
  // The listing of the directory asked for (a failed load keeps the previous one, not shown).
  const current = listing.data?.dir === dir ? listing.data : undefined;
  const here = current?.path ?? dir;
  const watch = useWatch(name, here, current !== undefined, listing.reload);
  const fileUrl = (path: string) => `${base}/files/${encPath(path)}`;
  const go = (path: string) => (setShown(undefined), setDir(path));
  const open = (e: Event) => {
    e.preventDefault();
    const path = String(new FormData(e.currentTarget as HTMLFormElement).get('path') ?? '').trim() || '/';
    void run(async () => {
      const entry = await api('statPath', 'GET', `${base}/fs/stat?path=${enc(path)}`);
      if (entry.type === 'dir') return go(entry.path);
      setDir(parentOf(entry.path));
      setShown(entry);
    });
  };
  const save = (path: string) =>
    void run(async () => {
      const blob = await download(fileUrl(path));
      const link = document.createElement('a');
      link.href = URL.createObjectURL(blob);
      link.download = path.split('/').pop() ?? 'file';
      link.click();
      setTimeout(() => URL.revokeObjectURL(link.href), 1000);
    });
  const send = (e: Event) => {
    const input = e.currentTarget as HTMLInputElement;
    const chosen = [...(input.files ?? [])];
    void run(async () => {
      for (const file of chosen) await upload(fileUrl(join(here, file.name)), file);
      input.value = '';
      listing.reload();
    });
  };
  const downloadButton = (path: string, file: string) => (
    <button onClick={() => save(path)} aria-label={`Download ${file}`}>
      Download
    </button>
  );
  return (
    <div class="card">
      <form class="form-row spaced" onSubmit={open} aria-label="Open a path" key={here}>
        <label class="grow">
          Path <input name="path" defaultValue={here} autocomplete="off" />
        </label>
        <span class="actions">
          <button type="submit">Open</button>
          <button type="button" onClick={() => go(parentOf(here))} disabled={here === '/'}>
            Up
          </button>
          <label class="button">
            Upload <input type="file" multiple onChange={send} class="visually-hidden" aria-label="Upload files" />
          </label>
        </span>
      </form>
      <Alert error={error ?? listing.error} />
      {shown && (
        <div class="card" data-testid="file-shown">
          <h2>{shown.path}</h2>
          <Fields value={{ type: shown.type, size: `${shown.size} B`, mode: shown.mode, modified: shown.mtime }} />
          {downloadButton(shown.path, shown.name)}
        </div>
      )}
      {current?.truncated && <p class="muted">Only the first 10,000 entries are shown.</p>}
      {watch.ended && (
        <p class="muted" role="status">
          This directory is no longer followed (it was deleted, or the sandbox stopped).{' '}
          <button class="link" onClick={watch.again}>
            Reload
          </button>
        </p>
      )}
      <Table
        head={['Name', 'Size', 'Mode', 'Modified', '']}
        empty={current ? 'Empty directory.' : listing.error ? '' : 'Loading…'}
        rows={(current?.entries ?? []).map((f) => [
          f.type === 'dir' || f.type === 'symlink' ? (
            <button class="link" onClick={() => go(join(here, f.name))}>
              {f.name}
              {f.type === 'dir' ? '/' : ' →'}
            </button>
          ) : (
            f.name
          ),
          f.type === 'dir' ? '' : `${f.size} B`,
          <code>{f.mode}</code>,
          <Time value={f.mtime} />,
          f.type === 'file' || f.type === 'symlink' ? downloadButton(join(here, f.name), f.name) : '',
        ])}
      />
    </div>
  );
}
