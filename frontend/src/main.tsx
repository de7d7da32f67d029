import { render } from 'preact';
import { App } from './app/App';
import './styles.css';

document.body.dataset.ready = 'false';
render(<App />, document.getElementById('app') as HTMLElement);
