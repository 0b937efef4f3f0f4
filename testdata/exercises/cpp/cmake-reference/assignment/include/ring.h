// A fixed-capacity ring buffer of ints and a line reader over a pseudo-terminal.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

class Ring {
public:
    explicit Ring(std::size_t capacity);
    // push adds v, dropping the oldest value when full; it returns whether one was dropped.
    bool push(int v);
    std::optional<int> pop();
    std::size_t size() const { return size_; }
    std::vector<int> contents() const;

private:
    std::vector<int> buf_;
    std::size_t head_ = 0, size_ = 0;
};

// ptyEcho writes line to a new pseudo-terminal's controller and reads it back from its terminal
// side, as a tester that drives a program on a terminal does. It throws on a failed call.
std::string ptyEcho(const std::string& line);
