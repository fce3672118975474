// Values every rank of a group must share before a collective path is chosen (a buffer size,
// size thresholds, an algorithm): gathered through the Bootstrap and compared on every rank,
// so a rank that read another file or another setting fails at construction, on every rank at
// once, naming both values, instead of pairing its calls with the wrong ones later.
#pragma once

#include <string>

#include "reference_engine/comm/bootstrap.h"

namespace tpb {

// Collective. Throws a tpb::Error on every rank when some rank's `mine` differs from rank 0's:
// "<what>: rank 0 has <value>, rank r has <value>" (the first such rank).
void require_agreement(Bootstrap& bootstrap, const std::string& what, const std::string& mine);

}  // namespace tpb
