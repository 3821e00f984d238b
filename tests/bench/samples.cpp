#include "samples.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace Qt::StringLiterals;

namespace AgentDeck::Bench {

qint64 nowNs()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void Samples::append(const Samples &other)
{
    m_values.insert(m_values.end(), other.m_values.begin(), other.m_values.end());
    m_sorted = false;
}

void Samples::sort() const
{
    if (!m_sorted) {
        std::sort(m_values.begin(), m_values.end());
        m_sorted = true;
    }
}

qint64 Samples::percentile(double q) const
{
    if (m_values.empty())
        return 0;
    sort();
    const double rank = std::ceil(std::clamp(q, 0.0, 1.0) * double(m_values.size()));
    const std::size_t index = rank < 1 ? 0 : std::size_t(rank) - 1;
    return m_values[std::min(index, m_values.size() - 1)];
}

double Samples::meanNs() const
{
    if (m_values.empty())
        return 0;
    return std::accumulate(m_values.begin(), m_values.end(), 0.0) / double(m_values.size());
}

QString Samples::summary() const
{
    return u"p50 %1, p99 %2, max %3 (n=%4)"_s
        .arg(formatMs(median()), formatMs(percentile(0.99)), formatMs(max()))
        .arg(qulonglong(size()));
}

QString formatMs(qint64 ns)
{
    const double ms = double(ns) / 1e6;
    return QString::number(ms, 'f', ms < 10 ? 3 : 1) + u" ms"_s;
}

QString formatRatio(double ratio)
{
    return QString::number(ratio, 'f', 2);
}

} // namespace AgentDeck::Bench
