#if Memcached
import Foundation
import Larder
import NIOCore
import NIOPosix

/// A TCP forwarder on 127.0.0.1 between a client and a server that can pass, delay,
/// black-hole or reset the traffic, switched at run time.
final class ChaosProxy: Sendable {
    enum Mode: Sendable, Equatable {
        /// Forward at once.
        case pass
        /// Forward server replies after a delay.
        case delay(TimeAmount)
        /// Accept and read, forward nothing.
        case blackHole
        /// Close every connection at once (and each new one).
        case reset
    }

    private let mode = Locked(Mode.pass)
    private let serverChannel: any Channel
    private let connections = Locked<[any Channel]>([])
    let port: Int

    init(upstreamPort: Int, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton) async throws {
        let mode = self.mode
        let connections = self.connections
        serverChannel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { inbound in
                connections.withLock { $0.append(inbound) }
                if mode.withLock({ $0 }) == .reset { return inbound.close() }
                return ClientBootstrap(group: inbound.eventLoop)
                    .channelInitializer { outbound in
                        outbound.pipeline.addHandler(Forwarder(peer: inbound, mode: mode, isReply: true))
                    }
                    .connect(host: "127.0.0.1", port: upstreamPort)
                    .flatMap { outbound in
                        connections.withLock { $0.append(outbound) }
                        inbound.closeFuture.whenComplete { _ in outbound.close(promise: nil) }
                        return inbound.pipeline.addHandler(Forwarder(peer: outbound, mode: mode, isReply: false))
                    }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        port = serverChannel.localAddress!.port!
    }

    /// Switches the mode; `.reset` also closes every open connection.
    func set(_ newMode: Mode) {
        mode.withLock { $0 = newMode }
        if newMode == .reset {
            for channel in connections.withLock({ $0 }) { channel.close(promise: nil) }
        }
    }

    func close() async {
        for channel in connections.withLock({ $0 }) { try? await channel.close() }
        try? await serverChannel.close()
    }

    private final class Forwarder: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        let peer: any Channel
        let mode: Locked<Mode>
        let isReply: Bool

        init(peer: any Channel, mode: Locked<Mode>, isReply: Bool) {
            self.peer = peer
            self.mode = mode
            self.isReply = isReply
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let bytes = unwrapInboundIn(data)
            let peer = self.peer
            switch mode.withLock({ $0 }) {
            case .pass:
                peer.writeAndFlush(bytes, promise: nil)
            case .delay(let amount):
                if isReply {
                    context.eventLoop.scheduleTask(in: amount) { peer.writeAndFlush(bytes, promise: nil) }
                } else {
                    peer.writeAndFlush(bytes, promise: nil)
                }
            case .blackHole:
                break
            case .reset:
                context.close(promise: nil)
                peer.close(promise: nil)
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            peer.close(promise: nil)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
#endif
