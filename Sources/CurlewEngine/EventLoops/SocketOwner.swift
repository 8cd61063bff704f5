import CLibCurl
import Glibc

/// libcurl 7.88 creates sockets without close-on-exec, so every process the application spawns would inherit
/// its connections, and a long-lived child would keep a connection open after libcurl closed it (no FIN).
/// Every loop therefore opens libcurl's sockets itself, close-on-exec.
func openCloseOnExecSocket(_ address: curl_sockaddr) -> Int32 {
    socket(address.family, address.socktype | Int32(SOCK_CLOEXEC.rawValue), address.protocol)
}

/// The callbacks through which a loop opens and closes libcurl's connection sockets itself.
struct SocketOwner {
    let open: curl_opensocket_callback
    let close: curl_closesocket_callback
    let context: UnsafeMutableRawPointer
}
