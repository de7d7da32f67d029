// Light or dark, following TensorBoard: its top document's body carries `dark-mode` when
// TensorBoard is dark. The plugin page is a same-origin frame of it; when it cannot be read
// (page opened alone, or inside a foreign frame) the system preference decides.

import { createContext } from 'preact';
import { useContext, useEffect, useState } from 'preact/hooks';

export type Theme = 'light' | 'dark';

export const ThemeContext = createContext<Theme>('light');
export const useThemeValue = (): Theme => useContext(ThemeContext);

function tensorBoardBody(): HTMLElement | null {
  try {
    if (window.top && window.top !== window) return window.top.document.body;
  } catch {
    // cross-origin top: fall back to the system preference
  }
  return null;
}

export function currentTheme(): Theme {
  const forced = new URLSearchParams(window.location.search).get('theme');
  if (forced === 'dark' || forced === 'light') return forced;
  const tbBody = tensorBoardBody();
  if (tbBody) return tbBody.classList.contains('dark-mode') ? 'dark' : 'light';
  return window.matchMedia?.('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
}

/** The theme, updated when TensorBoard or the system switches. */
export function useTheme(): Theme {
  const [theme, setTheme] = useState<Theme>(currentTheme);
  useEffect(() => {
    const update = () => setTheme(currentTheme());
    const media = window.matchMedia?.('(prefers-color-scheme: dark)');
    media?.addEventListener?.('change', update);
    let observer: MutationObserver | null = null;
    const tbBody = tensorBoardBody();
    if (tbBody) {
      observer = new MutationObserver(update);
      observer.observe(tbBody, { attributes: true, attributeFilter: ['class'] });
    }
    return () => {
      media?.removeEventListener?.('change', update);
      observer?.disconnect();
    };
  }, []);
  useEffect(() => {
    document.documentElement.classList.toggle('dark', theme === 'dark');
    document.documentElement.style.colorScheme = theme;
  }, [theme]);
  return theme;
}
