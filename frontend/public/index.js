// TensorBoard's entry point for the plugin: fill the plugin's frame with our page.
// URLs are resolved against this module, so --path_prefix and proxies keep working.
export function render() {
  const frame = document.createElement('iframe');
  frame.src = new URL('./index.html', import.meta.url).href;
  frame.title = 'PyTorch Profiler';
  frame.style.cssText = 'border:0;width:100%;height:100%;position:absolute;inset:0';
  document.body.style.margin = '0';
  document.body.appendChild(frame);
}
