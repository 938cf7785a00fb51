// Prompt-lookup drafts (engine/ngram_draft.h) on hand-made histories.
#include <gtest/gtest.h>

#include "engine/ngram_draft.h"

namespace kvlab::engine {
namespace {

using Ids = std::vector<int32_t>;

TEST(NgramDraft, TheLongestSuffixSeenBeforeAndWhatFollowedIt) {
  // Suffix (7 8 9) occurred at 1..3 and was followed by 4 5 6 7.
  const Ids h = {6, 7, 8, 9, 4, 5, 6, 7, 1, 7, 8, 9};
  EXPECT_EQ(ngram_draft(h, 3, 3, 1), (Ids{4, 5, 6}));
  EXPECT_EQ(ngram_draft(h, 10, 3, 1), (Ids{4, 5, 6, 7, 1, 7, 8, 9}));  // up to the end of the history
  // Only 2-grams: (8 9) is found at the same place.
  EXPECT_EQ(ngram_draft(h, 2, 2, 2), (Ids{4, 5}));
}

TEST(NgramDraft, TheLatestOccurrenceWins) {
  const Ids h = {5, 1, 2, 5, 3, 3, 5};
  EXPECT_EQ(ngram_draft(h, 2, 3, 1), (Ids{3, 3}));  // 5 was last followed by 3 3, not by 1 2
}

TEST(NgramDraft, FallsBackToShorterSuffixes) {
  const Ids h = {1, 2, 3, 9, 3};  // (9 3) and (3 9 3) never occurred before; (3) did, followed by 9
  EXPECT_EQ(ngram_draft(h, 4, 3, 1), (Ids{9, 3}));
  EXPECT_TRUE(ngram_draft(h, 4, 3, 2).empty());
  // A longest suffix shorter than the shortest: that length alone (--draft-ngram 1).
  EXPECT_EQ(ngram_draft(h, 4, 1, 2), (Ids{9, 3}));
}

TEST(NgramDraft, RepeatsAPeriod) {
  const Ids h = {4, 4, 4};
  EXPECT_EQ(ngram_draft(h, 5, 2, 1), (Ids{4}));  // (4 4) at 0..1, followed by the last 4
  const Ids ab = {1, 2, 1, 2, 1};
  EXPECT_EQ(ngram_draft(ab, 3, 3, 1), (Ids{2, 1}));
}

TEST(NgramDraft, NothingWhenNothingRepeatsOrNothingIsAsked) {
  EXPECT_TRUE(ngram_draft(Ids{1, 2, 3, 4}, 4, 3, 1).empty());
  EXPECT_TRUE(ngram_draft(Ids{7}, 4, 3, 1).empty());
  EXPECT_TRUE(ngram_draft(Ids{}, 4, 3, 1).empty());
  EXPECT_TRUE(ngram_draft(Ids{1, 1, 1}, 0, 3, 1).empty());
}

}  // namespace
}  // namespace kvlab::engine
