#include "suite/launch/control_socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "tpb/check.h"

namespace tpb::control {
namespace {

sockaddr_un make_address(const std::string& address, socklen_t& length) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  TPB_CHECK(!address.empty() && address.size() < sizeof(addr.sun_path),
            "control socket address '" << address << "' is empty or longer than "
                                       << sizeof(addr.sun_path) - 1 << " bytes");
  std::memcpy(addr.sun_path, address.data(), address.size());
  // Abstract namespace: a leading NUL, and the length counts only the bytes used.
  if (address[0] == '@') addr.sun_path[0] = '\0';
  length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size() + (address[0] == '@' ? 0 : 1));
  return addr;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string to_hex(const std::string& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    hex.push_back(kDigits[c >> 4]);
    hex.push_back(kDigits[c & 15]);
  }
  return hex;
}

std::string from_hex(const std::string& hex) {
  TPB_CHECK(hex.size() % 2 == 0, "control message: hex payload has odd length " << hex.size());
  std::string bytes(hex.size() / 2, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const int hi = hex_digit(hex[2 * i]), lo = hex_digit(hex[2 * i + 1]);
    TPB_CHECK(hi >= 0 && lo >= 0, "control message: bad hex digit at offset " << 2 * i);
    bytes[i] = static_cast<char>(hi * 16 + lo);
  }
  return bytes;
}

int try_listen_unix(const std::string& address, int backlog) {
  socklen_t length = 0;
  const sockaddr_un addr = make_address(address, length);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  TPB_CHECK(fd >= 0, "socket(AF_UNIX) failed: " << std::strerror(errno));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), length) != 0 || listen(fd, backlog) != 0) {
    const int err = errno;
    close(fd);
    if (err == EADDRINUSE) return -1;
    TPB_FAIL("cannot listen on control socket '" << address << "': " << std::strerror(err));
  }
  return fd;
}

int listen_unix(const std::string& address, int backlog) {
  const int fd = try_listen_unix(address, backlog);
  TPB_CHECK(fd >= 0, "cannot listen on control socket '" << address << "': " << std::strerror(EADDRINUSE));
  return fd;
}

int connect_unix(const std::string& address) {
  socklen_t length = 0;
  const sockaddr_un addr = make_address(address, length);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  TPB_CHECK(fd >= 0, "socket(AF_UNIX) failed: " << std::strerror(errno));
  int rc;
  do {
    rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), length);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    close(fd);
    TPB_FAIL("cannot connect to control socket '" << address << "': " << std::strerror(err));
  }
  return fd;
}

int listen_tcp(const std::string& bind_address, int backlog, int& port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = 0;  // the kernel picks a free port
  TPB_CHECK(inet_pton(AF_INET, bind_address.c_str(), &addr.sin_addr) == 1,
            "control socket: '" << bind_address << "' is not an IPv4 address to listen on");
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  TPB_CHECK(fd >= 0, "socket(AF_INET) failed: " << std::strerror(errno));
  socklen_t length = sizeof addr;
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, backlog) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    const int err = errno;
    close(fd);
    TPB_FAIL("cannot listen for ranks on TCP " << bind_address << ": " << std::strerror(err));
  }
  port = ntohs(addr.sin_port);
  return fd;
}

int connect_tcp(const std::string& host_port) {
  const std::size_t colon = host_port.rfind(':');
  TPB_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < host_port.size(),
            "control address '" << host_port << "': expected HOST:PORT");
  const std::string host = host_port.substr(0, colon), port = host_port.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  TPB_CHECK(rc == 0, "control address '" << host_port << "': " << gai_strerror(rc));
  int fd = -1, err = 0;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    int c;
    do {
      c = connect(fd, a->ai_addr, a->ai_addrlen);
    } while (c != 0 && errno == EINTR);
    if (c != 0) {
      err = errno;
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  TPB_CHECK(fd >= 0, "cannot connect to the controller at " << host_port << ": " << std::strerror(err));
  const int one = 1;  // control messages are small and answered at once: no Nagle delay
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

bool LineReader::next_line(std::string& line) {
  const auto newline = buffer_.find('\n');
  if (newline == std::string::npos) return false;
  line.assign(buffer_, 0, newline);
  buffer_.erase(0, newline + 1);
  return true;
}

void write_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    TPB_CHECK(n > 0, "control socket write failed: " << std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
}

std::string encode(const nlohmann::json& message) { return message.dump() + "\n"; }

bool read_message(int fd, LineReader& reader, nlohmann::json& message) {
  std::string line;
  while (!reader.next_line(line)) {
    char buf[65536];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    TPB_CHECK(n >= 0, "control socket read failed: " << std::strerror(errno));
    if (n == 0) return false;
    reader.append(buf, static_cast<std::size_t>(n));
  }
  try {
    message = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    TPB_FAIL("malformed control message (" << e.what() << "): " << line.substr(0, 200));
  }
  TPB_CHECK(message.is_object() && message.contains("type") && message["type"].is_string(),
            "control message without a \"type\": " << line.substr(0, 200));
  return true;
}

}  // namespace tpb::control
