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
