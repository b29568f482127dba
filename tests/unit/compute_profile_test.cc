// Compute profiles (src/profile): the text a run writes from its timeline, read back, and
// the refusals of malformed shape lines.
#include <gtest/gtest.h>

#include <sstream>

#include "poseidon/errors.h"
#include "profile/compute_profile.h"

namespace poseidon {
namespace {

ModelInfo twoLayers() {
  ModelInfo m;
  m.name = "tiny";
  LayerInfo conv;
  conv.name = "conv0";
  conv.kind = LayerKind::kConv;
  conv.tensors = {{"weight", {16, 3, 3, 3}}, {"bias", {16}}};
  LayerInfo fc;
  fc.name = "fc1";
  fc.kind = LayerKind::kFC;
  fc.M = 10;
  fc.N = 144;
  fc.rows_per_example = 2;
  fc.factorable = false;
  fc.tensors = {{"weight", {10, 144}}, {"bias", {10}}};
  m.layers = {conv, fc};
  return m;
}

ComputeProfile parse(const std::string& text) {
  std::istringstream in(text);
  return parseProfile(in, "test.prof");
}

// A profile's batch and one layer's times, so that only `line` can be what is refused.
const std::string kTimes = "batch 4\nlayer fc0 forward_ms 1 backward_ms 2\n";

// `line` after kTimes is refused with a message that holds `words`.
void refuses(const std::string& line, const std::string& words) {
  try {
    parse(kTimes + line);
    ADD_FAILURE() << "accepted: " << line;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(ComputeProfile, TextFromSpansReadsBackWithShapesAndTheTimeOutsideTheLayers) {
  const ModelInfo model = twoLayers();
  // Three iterations: medians 2 and 6 (conv0), 1 and 3 (fc1), a ReLU of 0.5, waits of 1
  // (conv0) and an iteration of 20: 20 - (2 + 6 + 1 + 1 + 3 + 0.5) = 6.5 outside.
  const std::map<std::string, std::vector<double>> spans = {
      {"forward conv0", {2, 2, 9}}, {"backward conv0", {6, 5, 7}}, {"wait conv0", {1, 0, 1}},
      {"forward fc1", {1, 1, 1}},   {"backward fc1", {3, 3, 3}},   {"forward relu", {0.5, 0.5, 0.5}},
      {"iteration", {20, 19, 21}}};
  const ComputeProfile p = parse(profileText(model, spans, 32, 4));
  EXPECT_EQ(p.batch, 32);
  ASSERT_EQ(p.layers.size(), 2u);
  EXPECT_DOUBLE_EQ(p.layers.at("conv0").first, 2);
  EXPECT_DOUBLE_EQ(p.layers.at("conv0").second, 6);
  EXPECT_DOUBLE_EQ(p.layers.at("fc1").second, 3);
  EXPECT_DOUBLE_EQ(p.other_forward_ms, 0.5 + 6.5);
  EXPECT_DOUBLE_EQ(p.other_backward_ms, 0);
  ModelInfo read;
  read.name = model.name;
  read.layers = p.shapes;
  EXPECT_EQ(read.describe(), model.describe());  // kinds, shapes, M x N, rows, factorable
  EXPECT_EQ(p.shapes[1].M, 10);
  EXPECT_EQ(p.shapes[1].N, 144);
}

TEST(ComputeProfile, WithoutAnIterationSpanNothingIsOutside) {
  const ComputeProfile p =
      parse(profileText(twoLayers(), {{"forward conv0", {2}}, {"backward conv0", {4}}, {"forward fc1", {1}}}, 8, 1));
  EXPECT_DOUBLE_EQ(p.other_forward_ms, 0);
  EXPECT_DOUBLE_EQ(p.layers.at("fc1").second, 0);  // no span: 0, not a missing layer
}

TEST(ComputeProfile, TheComputeThreadsCpuTimeReadsBackWhereSampled) {
  std::map<std::string, std::vector<double>> spans = {{"forward conv0", {2}}, {"backward conv0", {4}}};
  EXPECT_EQ(parse(profileText(twoLayers(), spans, 8, 1)).cpu_iteration_ms, 0);  // not sampled: absent
  spans["cpu iteration"] = {3, 5, 4};
  EXPECT_DOUBLE_EQ(parse(profileText(twoLayers(), spans, 8, 1)).cpu_iteration_ms, 4);  // the median
  EXPECT_DOUBLE_EQ(parse(kTimes + "cpu iteration_ms 3\n").cpu_iteration_ms, 3);
  refuses("cpu iteration_ms\n", "expected 'batch K'");
  refuses("cpu wall_ms 3\n", "expected 'batch K'");
  refuses("cpu iteration_ms -1\n", "iteration_ms must be a number of milliseconds");
  refuses("cpu iteration_ms 3 4\n", "unexpected '4'");
}

TEST(ComputeProfile, OldProfilesWithoutShapesStillRead) {
  const ComputeProfile p = parse("batch 4\nlayer fc0 forward_ms 1 backward_ms 2\nother forward_ms 0.5 backward_ms 0\n");
  EXPECT_TRUE(p.shapes.empty());
  EXPECT_DOUBLE_EQ(p.other_forward_ms, 0.5);
}

TEST(ComputeProfile, RefusesMalformedShapeLines) {
  refuses("shape fc0 kind fc tensor weight 3x4\n", "needs M and N");
  refuses("shape fc0 kind fc M 3 N 4\n", "at least one 'tensor");
  refuses("shape fc0 kind fc M 3 N 4 tensor weight 3x0\n", "integer from 1 to");
  refuses("shape fc0 kind fc M 3 N 4 tensor weight\n", "without its value");
  refuses("shape fc0 kind dense M 3 N 4 tensor w 3x4\n", "fc, conv or other");
  refuses("shape fc0 kind fc M 3 N 4 colour red tensor w 3x4\n", "unexpected 'colour'");
  refuses("shape fc0 kind fc M 3 N 4 factorable 2 tensor w 3x4\n", "factorable must be 0 or 1");
  refuses("shape fc0 kind fc M 3 M 3 N 4 tensor w 3x4\n", "'M' given twice");
  refuses("shape fc0 kind conv M 3 N 4 tensor w 3x4\n", "M and N are for fc layers");
  refuses("shape fc0 kind other tensor w 16777217\n", "from 1 to 16777216");
  // Dimensions each within bounds whose product is not (numel() would overflow int64).
  refuses("shape fc0 kind other tensor w 16777216x16777216x16777216\n", "more than 2^40 values");
  refuses("shape fc0 kind other tensor a 1048576x1048576 tensor b 1048576x1048576\n", "layer of more than 2^40");
  refuses("shape fc0 kind other tensor w 3\nshape fc0 kind other tensor w 3\n", "two shape lines for layer 'fc0'");
  refuses("shape fc9 kind other tensor w 3\n", "layer 'fc9', which has no times");
  refuses("shape fc0 kind other tensor w 1x1x1x1x1x1x1x1x1\n", "at most 8 dimensions");
  // Shapes for some layers but not all.
  try {
    parse(
        "batch 4\nlayer a forward_ms 1 backward_ms 2\nlayer b forward_ms 1 backward_ms 2\n"
        "shape a kind other tensor w 3\n");
    ADD_FAILURE() << "accepted shapes for one of two layers";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("every layer one, or none"), std::string::npos) << e.what();
  }
}

TEST(ComputeProfile, RefusesToWriteNamesItCannotReadBack) {
  ModelInfo model = twoLayers();
  model.layers[0].name = "my conv";  // legal in PyTorch (a ModuleDict key), not one word
  EXPECT_THROW(profileText(model, {}, 8, 1), InputError);
  model = twoLayers();
  model.layers[1].tensors[0].name = "#weight";
  EXPECT_THROW(profileText(model, {}, 8, 1), InputError);
}

TEST(ComputeProfile, EveryWaitIsCommunicationNotCompute) {
  // A wait at the forward's start (and at the step) is left out of `other` like a layer's.
  const ComputeProfile p = parse(profileText(
      twoLayers(),
      {{"forward conv0", {2}}, {"forward fc1", {1}}, {"wait begin", {4}}, {"wait step", {3}}, {"iteration", {12}}}, 8,
      1));
  EXPECT_DOUBLE_EQ(p.other_forward_ms, 12 - 2 - 1 - 4 - 3);
}

}  // namespace
}  // namespace poseidon
