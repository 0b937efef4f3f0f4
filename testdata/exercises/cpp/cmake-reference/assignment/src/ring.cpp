#include "ring.h"

#include <fcntl.h>
#include <stdexcept>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

Ring::Ring(std::size_t capacity) : buf_(capacity) {
    if (capacity == 0) {
        throw std::invalid_argument("a ring needs a capacity of at least 1");
    }
}

bool Ring::push(int v) {
    std::size_t tail = (head_ + size_) % buf_.size();
    buf_[tail] = v;
    if (size_ == buf_.size()) {
        head_ = (head_ + 1) % buf_.size();
        return true;
    }
    ++size_;
    return false;
}

std::optional<int> Ring::pop() {
    if (size_ == 0) {
        return std::nullopt;
    }
    int v = buf_[head_];
    head_ = (head_ + 1) % buf_.size();
    --size_;
    return v;
}

std::vector<int> Ring::contents() const {
    std::vector<int> out;
    for (std::size_t i = 0; i < size_; ++i) {
        out.push_back(buf_[(head_ + i) % buf_.size()]);
    }
    return out;
}

namespace {
[[noreturn]] void fail(const char* what) {
    throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}
}  // namespace

std::string ptyEcho(const std::string& line) {
    int ctl = posix_openpt(O_RDWR | O_NOCTTY);
    if (ctl < 0) fail("posix_openpt");
    if (grantpt(ctl) != 0 || unlockpt(ctl) != 0) fail("grantpt/unlockpt");
    const char* name = ptsname(ctl);
    if (name == nullptr) fail("ptsname");
    int term = open(name, O_RDWR | O_NOCTTY);
    if (term < 0) fail("open the terminal side");
    std::string in = line + "\n";
    if (write(ctl, in.data(), in.size()) != static_cast<ssize_t>(in.size())) fail("write");
    char buf[256];
    ssize_t n = read(term, buf, sizeof buf);
    if (n < 0) fail("read");
    close(term);
    close(ctl);
    std::string out(buf, static_cast<std::size_t>(n));
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out;
}
