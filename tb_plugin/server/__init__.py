"""The TensorBoard side: the store that loads runs off the request path within one memory
budget, the HTTP routes, stack frames resolved to files on this machine, and the plugin."""
