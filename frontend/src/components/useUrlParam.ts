// A page-URL parameter as component state (see base/url.ts).

import { useCallback, useEffect, useState } from 'preact/hooks';
import { getParam, setParams, subscribe } from '../base/url';

export function useUrlParam(name: string, fallback: string): [string, (value: string | null) => void] {
  const [value, setValue] = useState(() => getParam(name) ?? fallback);
  useEffect(() => {
    const update = () => setValue(getParam(name) ?? fallback);
    // the URL may have changed between the render and this subscription (a report file's
    // selection is applied once its data is inflated, which WebKit does before effects run)
    update();
    return subscribe(update);
  }, [name, fallback]);
  const set = useCallback((next: string | null) => setParams({ [name]: next === fallback ? null : next }), [name, fallback]);
  return [value, set];
}
