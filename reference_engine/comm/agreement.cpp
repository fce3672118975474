// require_agreement (see agreement.h).
#include "reference_engine/comm/agreement.h"

#include <vector>

#include "tpb/check.h"

namespace tpb {

void require_agreement(Bootstrap& bootstrap, const std::string& what, const std::string& mine) {
  const std::vector<std::string> all = bootstrap.all_gather(mine);
  for (std::size_t r = 1; r < all.size(); ++r)
    TPB_CHECK(all[r] == all[0], what << ": the ranks disagree: rank 0 has " << all[0] << ", rank " << r << " has "
                                     << all[r] << " (every rank must decide the same path)");
}

}  // namespace tpb
