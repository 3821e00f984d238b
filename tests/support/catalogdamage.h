#pragma once

// Damage of the kinds a disk, a crash or a stray write leaves in an SQLite catalog, made on
// purpose, for the tests of what finds it. Each takes the file of a catalog nobody has open and
// answers an empty string, or what went wrong.
#include <QString>

namespace AgentDeck::Testing {

// Leaves `index` without its entries for the rows `lostRows` (an SQL condition on its table)
// selects, the rows and the schema as they were: an index and its table that disagree, which
// PRAGMA quick_check does not see. The index is made again as a partial one without those
// rows, then its schema entry is given back its own definition.
QString loseIndexEntries(const QString &path, const QString &index, const QString &lostRows);

// Writes `value` over byte `offset` of the file (the header is its first 100 bytes).
QString overwriteByte(const QString &path, qint64 offset, char value);

} // namespace AgentDeck::Testing
