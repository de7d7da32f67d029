"""The names of the plugin's data routes (each an `Api` method of the same name, described in
`openapi.yaml`). Kept apart from `api` so that TensorBoard can list the routes at start-up
without importing what answers them (see `plugin.ProfilerPlugin.get_plugin_apps`)."""

API_ROUTES = (
    "runs", "workers", "spans", "info", "tables", "views",
    "overview", "steps", "gpu_summary",
    "operators", "operator_stacks",
    "kernels", "kernel_tensor_cores",
    "idle_time", "kernel_launches", "kernel_launch_summary", "queue_length", "memory_bandwidth",
    "queue_length_summary", "kernel_sequences", "gpu_annotations",
    "critical_path",
    "memory_devices", "memory_curve", "memory_events", "memory_stats",
    "modules", "module_flame",
    "distributed", "job", "diff",
    "timeline_tracks", "timeline_slices", "timeline_counters", "timeline_event", "timeline_flows",
    "timeline_search", "timeline_summary", "timeline_critical_path", "timeline_ranks", "timeline_rank_slices",
    "timeline_rank_search", "timeline_rank_summary", "timeline_rank_counters",
    "trace_file",
    "compiled",
    "lightning",
    "flops",
    "cuda_graphs",
    "snapshot_peak", "snapshot_oom", "snapshot_timeline", "snapshot_live", "snapshot_blame", "snapshot_categories",
    "snapshot_flame", "snapshot_state", "snapshot_ranks", "snapshot_trace",
)
