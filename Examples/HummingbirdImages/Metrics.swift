// The example's `/metrics` page: the image cache's statistics in Prometheus's text format.
#if Hummingbird && Metrics
import Hummingbird
import LarderImage
import LarderMetrics
import Prometheus

/// Serves `GET /metrics` from a Prometheus registry that the image cache's storage statistics
/// are reported into (storage label `"images"`), refreshed at each scrape.
func exportMetrics(of images: ImageCache, on router: Router<BasicRequestContext>) {
    let registry = PrometheusCollectorRegistry()
    let metrics = StorageMetrics(
        storage: images.storage, label: "images", factory: PrometheusMetricsFactory(registry: registry))
    router.get("metrics") { _, _ -> Response in
        metrics.report()
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
            body: .init(byteBuffer: ByteBuffer(string: registry.emitToString())))
    }
}
#endif
