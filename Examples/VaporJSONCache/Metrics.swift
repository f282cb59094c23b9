// The example's `/metrics` page: the cache's statistics in Prometheus's text format.
#if Vapor && Metrics
import Larder
import LarderMetrics
import Prometheus
import Vapor

/// Serves `GET /metrics` from a Prometheus registry that `storage`'s statistics are reported
/// into (storage label `"forecast"`), refreshed at each scrape so a scrape is never stale.
func exportMetrics(of storage: Larder.Storage<String, JSONValue>, on app: Application) {
    let registry = PrometheusCollectorRegistry()
    let metrics = StorageMetrics(
        storage: storage, label: "forecast", factory: PrometheusMetricsFactory(registry: registry))
    app.get("metrics") { _ -> Response in
        metrics.report()
        return Response(
            status: .ok, headers: ["Content-Type": "text/plain; version=0.0.4"],
            body: .init(string: registry.emitToString()))
    }
}
#endif
