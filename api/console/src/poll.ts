import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { messageOf } from './api.ts';

/** How often a page's data is read again while the tab is visible. */
export const REFRESH_MS = 5000;

/**
 * Loads a page's data now, whenever `deps` change, and every `everyMs` while the tab is visible
 * (a hidden tab makes no calls; showing it again reads at once). The last good data stays shown
 * while a later read fails; `error` says why.
 */
export function usePolled<T>(
  load: () => Promise<T>,
  deps: unknown[],
  everyMs: number = REFRESH_MS,
): { data: T | null; error: string; reload: () => void; loadedAt: Date | null } {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState('');
  const [loadedAt, setLoadedAt] = useState<Date | null>(null);
  const generation = useRef(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  const reload = useCallback(() => {
    const mine = ++generation.current;
    loadRef.current().then(
      (d) => {
        if (mine !== generation.current) return;
        setData(d);
        setError('');
        setLoadedAt(new Date());
      },
      (err: unknown) => mine === generation.current && setError(messageOf(err)),
    );
  }, []);
  useEffect(() => {
    setData(null);
    setError('');
    reload();
    const timer = setInterval(() => document.visibilityState === 'visible' && reload(), everyMs);
    const shown = () => document.visibilityState === 'visible' && reload();
    document.addEventListener('visibilitychange', shown);
    return () => {
      generation.current++;
      clearInterval(timer);
      document.removeEventListener('visibilitychange', shown);
    };
    // The caller names what the load depends on.
  }, deps);
  return { data, error, reload, loadedAt };
}
