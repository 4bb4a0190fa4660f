# test_metrics reads docs/metrics.md and docs/grafana-dashboard.json.
target_compile_definitions(${name} PRIVATE
  RS_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
