#pragma once

#include <QString>

#include <chrono>
#include <vector>

namespace AgentDeck::Bench {

// Nanoseconds on the monotonic clock, comparable across the bench's threads.
qint64 nowNs();

// Latency samples in nanoseconds; percentiles by nearest rank.
class Samples
{
public:
    void reserve(std::size_t n) { m_values.reserve(n); }
    void add(qint64 ns)
    {
        m_values.push_back(ns);
        m_sorted = false;
    }
    void append(const Samples &other);
    std::size_t size() const { return m_values.size(); }
    bool isEmpty() const { return m_values.empty(); }

    // q in [0, 1]; 0 for no samples.
    qint64 percentile(double q) const;
    qint64 median() const { return percentile(0.5); }
    qint64 max() const { return percentile(1.0); }
    double meanNs() const;

    // "p50 1.23 ms, p99 4.56 ms, max 7.89 ms (n=1000)"
    QString summary() const;

private:
    void sort() const;

    mutable std::vector<qint64> m_values;
    mutable bool m_sorted = true;
};

QString formatMs(qint64 ns);
QString formatRatio(double ratio);

} // namespace AgentDeck::Bench
