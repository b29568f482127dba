#include "models/model_spec.h"

#include <gtest/gtest.h>

#include "poseidon/errors.h"

namespace poseidon {
namespace {

TEST(ModelSpec, BuiltinsHaveTheDesignDocShapes) {
  ModelInfo fcnet = modelInfoFromSpec(builtinModel("fcnet"));
  ASSERT_EQ(fcnet.layers.size(), 6u);
  EXPECT_EQ(fcnet.layers[3].kind, LayerKind::kFC);
  EXPECT_EQ(fcnet.layers[3].N, 6272);
  EXPECT_EQ(fcnet.layers[3].M, 4096);
  EXPECT_EQ(fcnet.layers[4].M, 4096);
  EXPECT_EQ(fcnet.layers[5].M, 10);
  ModelInfo convnet = modelInfoFromSpec(builtinModel("convnet"));
  ASSERT_EQ(convnet.layers.size(), 5u);
  EXPECT_EQ(convnet.layers.back().N, 6272);
  EXPECT_NO_THROW(builtinModel("mlp"));
}

// The error message for `text`, or "" when it parses.
std::string errorOf(const std::string& text) {
  try {
    parseModelText(text, "f", "x");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// The spec is refused with an error that contains `fragment`.
void expectRefused(const std::string& text, const std::string& fragment) {
  const std::string error = errorOf(text);
  EXPECT_NE(error.find(fragment), std::string::npos) << error;
}

TEST(ModelSpec, MalformedFilesNameTheLine) {
  EXPECT_NE(errorOf("input 1 28 28\nclasses 10\nflatten\nfc ten\n").find("f line 4"), std::string::npos);
  EXPECT_NE(errorOf("input 1 28 28\nclasses 10\nconv 8\n").find("line 3"), std::string::npos);
  EXPECT_NE(errorOf("input 1 28 28\nclasses 10\nfc 10\n").find("flatten"), std::string::npos);
  EXPECT_NE(errorOf("input 1 28 28\nclasses 10\nwarp 3\n").find("unknown layer 'warp'"), std::string::npos);
  EXPECT_NE(errorOf("classes 10\nflatten\nfc 10\n").find("input"), std::string::npos);
  EXPECT_NE(errorOf("input 1 28 28\nclasses 10\nflatten\nfc 5\n").find("classes"), std::string::npos);
  EXPECT_NE(errorOf("input 1 4 4\nclasses 2\nconv 3 9\nflatten\nfc 2\n").find("does not fit"), std::string::npos);
  EXPECT_NE(errorOf("input 1 28 28\nclasses 10\nflatten\ndropout 1.5\nfc 10\n").find("dropout"), std::string::npos);
  EXPECT_EQ(errorOf("# ok\ninput 1 28 28\nclasses 10\nconv 4 3 pad=1 stride=2 # 14x14\nrelu\npool 2\nflatten\n"
                    "dropout 0.25\nfc 10\n"),
            "");
}

// Sizes whose products would overflow int64_t (the fuzzer's finds) are refused on their
// line, before any arithmetic on them; a spec that parses has a numel that fits.
TEST(ModelSpec, SizesThatWouldOverflowAreRefusedNamingTheLine) {
  expectRefused("input 1 1 1\nclasses 1\nconv 1 1 pad=4611686018427387904\nflatten\nfc 1\n",
                "f line 3: pad must be at most 16777216");
  expectRefused("input 1 28 28\nclasses 10\nconv 8 3 stride=99999999999\nflatten\nfc 10\n", "line 3: stride");
  expectRefused("input 3037000500 3037000500 2\nclasses 1\nflatten\nfc 1\n",
                "f line 1: input channels must be at most");
  // Each size within bounds, their product not.
  expectRefused("input 65536 65536 65536\nclasses 1\nflatten\nfc 1\n",
                "f line 1: input of 65536x65536x65536 has more than 4294967296 values per example");
  expectRefused("input 1 4096 4096\nclasses 1\nconv 16777216 1\nflatten\nfc 1\n", "line 3: conv output");
  expectRefused("input 1 28 28\nclasses 10\nflatten\nfc 100000000000000000\nrelu\nfc 10\n",
                "f line 4: fc output features must be at most 16777216");
  // 2^32 inputs into 2^24 outputs: 2^56 weights, past the model's bound on parameters.
  expectRefused("input 1 65536 65536\nclasses 16777216\nflatten\nfc 16777216\n",
                "f line 4: fc takes the model past 1099511627776 parameters");
  expectRefused("input 16777216 1 1\nclasses 1\nconv 16777216 1\nflatten\nfc 1\n", "line 3: conv takes");
  expectRefused("input 1 28 28\nclasses 4294967306\nflatten\nfc 10\n",
                "f line 2: class count must be at most 16777216, got '4294967306'");
  expectRefused("input 1 28 28\nclasses 99999999999999999999999\nflatten\nfc 10\n", "line 2: class count");
  // The largest sizes allowed still parse, and their numel fits.
  const ModelSpec big =
      parseModelText("input 1 65536 65536\nclasses 16777216\nflatten\nfc 128\nfc 16777216\n", "f", "x");
  EXPECT_EQ(big.classes, 16777216);
  EXPECT_EQ(modelInfoFromSpec(big).numel(), (std::int64_t{1} << 39) + 128 + std::int64_t{128} * 16777216 + 16777216);
}

TEST(ModelSpec, NumbersMustBeWholeAndFinite) {
  expectRefused("input 1 28 28\nclasses 10\nflatten\nfc 10\nlr inf\n",
                "f line 5: the learning rate must be a finite positive number, got 'inf'");
  expectRefused("input 1 2 2\nclasses 2\nlr nan\nflatten\nfc 2\n", "line 3: the learning rate");
  expectRefused("input 1 2 2\nclasses 2\nlr 1e999\nflatten\nfc 2\n", "line 3: the learning rate");
  expectRefused("input 1 2 2\nclasses 2\nlr 0\nflatten\nfc 2\n", "line 3: the learning rate");
  expectRefused("input 1 2 2\nclasses 2\nlr 0.05abc\nflatten\nfc 2\n", "line 3: the learning rate");
  expectRefused("input 1 28 28\nclasses 10\nflatten\ndropout 0.5xyz\nfc 10\n",
                "f line 4: dropout probability must be in [0, 1), got '0.5xyz'");
  expectRefused("input 1 2 2\nclasses 2\nflatten\ndropout nan\nfc 2\n", "line 4: dropout");
  expectRefused("input 1 2 2\nclasses 2\nflatten\nfc 2x\n", "line 4: fc output features");
  EXPECT_DOUBLE_EQ(parseModelText("input 1 2 2\nclasses 2\nlr 1e-3\nflatten\ndropout 0\nfc 2\n", "f", "x").lr, 1e-3);
}

TEST(ModelSpec, UnknownBuiltinListsTheKnownOnes) {
  try {
    builtinModel("resnet");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("fcnet"), std::string::npos);
  }
}

TEST(ModelSpec, RecommendedLearningRates) {
  EXPECT_DOUBLE_EQ(builtinModel("fcnet").lr, 0.05);
  EXPECT_DOUBLE_EQ(builtinModel("convnet").lr, 0.01);
  EXPECT_DOUBLE_EQ(parseModelText("input 1 2 2\nclasses 2\nflatten\nfc 2\n", "f", "x").lr, 0.0);
  EXPECT_DOUBLE_EQ(parseModelText("input 1 2 2\nclasses 2\nlr 0.3\nflatten\nfc 2\n", "f", "x").lr, 0.3);
  EXPECT_NE(errorOf("input 1 2 2\nclasses 2\nlr fast\nflatten\nfc 2\n").find("learning rate"), std::string::npos);
}

TEST(ModelSpec, ShapesFlowThroughTheLayers) {
  ModelSpec s = parseModelText("input 3 32 32\nclasses 4\nconv 8 3 stride=2 pad=1\npool 2\nflatten\nfc 4\n", "f", "x");
  EXPECT_EQ(s.layers.back().in, 8 * 8 * 8);
}

}  // namespace
}  // namespace poseidon
