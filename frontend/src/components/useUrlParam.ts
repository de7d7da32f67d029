// A page-URL parameter as component state (see base/url.ts).

import { useCallback, useEffect, useState } from 'preact/hooks';
import { getParam, setParams, subscribe } from '../base/url';

export function useUrlParam(name: string, fallback: string): [string, (value: string | null) => void] {
  const [value, setValue] = useState(() => getParam(name) ?? fallback);
  useEffect(() => subscribe(() => setValue(getParam(name) ?? fallback)), [name, fallback]);
  const set = useCallback((next: string | null) => setParams({ [name]: next === fallback ? null : next }), [name, fallback]);
  return [value, set];
}
