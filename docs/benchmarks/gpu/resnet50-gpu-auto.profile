# poseidon compute profile: model ResNet, medians over the run of rank 0 of 4
batch 32
layer conv1 forward_ms 0.3716 backward_ms 0.184127
layer bn1 forward_ms 0.256866 backward_ms 0.195127
layer layer1.0.conv1 forward_ms 0.317751 backward_ms 0.161929
layer layer1.0.bn1 forward_ms 0.15067 backward_ms 0.122365
layer layer1.0.conv2 forward_ms 0.170752 backward_ms 0.186916
layer layer1.0.bn2 forward_ms 0.108373 backward_ms 0.133793
layer layer1.0.conv3 forward_ms 0.13169 backward_ms 0.13707
layer layer1.0.bn3 forward_ms 0.09585 backward_ms 0.116641
layer layer1.0.downsample.0 forward_ms 0.075247 backward_ms 0.169199
layer layer1.0.downsample.1 forward_ms 0.091662 backward_ms 0.161708
layer layer1.1.conv1 forward_ms 0.238475 backward_ms 0.209819
layer layer1.1.bn1 forward_ms 0.111076 backward_ms 0.142422
layer layer1.1.conv2 forward_ms 0.137709 backward_ms 0.213325
layer layer1.1.bn2 forward_ms 0.095907 backward_ms 0.14447
layer layer1.1.conv3 forward_ms 0.09821 backward_ms 0.149544
layer layer1.1.bn3 forward_ms 0.102969 backward_ms 0.158639
layer layer1.2.conv1 forward_ms 0.162583 backward_ms 0.213894
layer layer1.2.bn1 forward_ms 0.093487 backward_ms 0.149711
layer layer1.2.conv2 forward_ms 0.141052 backward_ms 0.216058
layer layer1.2.bn2 forward_ms 0.11081 backward_ms 0.136674
layer layer1.2.conv3 forward_ms 0.099523 backward_ms 0.148153
layer layer1.2.bn3 forward_ms 0.0868 backward_ms 0.145552
layer layer2.0.conv1 forward_ms 0.199896 backward_ms 0.217529
layer layer2.0.bn1 forward_ms 0.108672 backward_ms 0.135742
layer layer2.0.conv2 forward_ms 0.159254 backward_ms 0.206698
layer layer2.0.bn2 forward_ms 0.107135 backward_ms 0.146114
layer layer2.0.conv3 forward_ms 0.11267 backward_ms 0.13201
layer layer2.0.bn3 forward_ms 0.10022 backward_ms 0.108491
layer layer2.0.downsample.0 forward_ms 0.116427 backward_ms 0.207006
layer layer2.0.downsample.1 forward_ms 0.09133 backward_ms 0.146768
layer layer2.1.conv1 forward_ms 0.146075 backward_ms 0.150462
layer layer2.1.bn1 forward_ms 0.099943 backward_ms 0.136676
layer layer2.1.conv2 forward_ms 0.142375 backward_ms 0.20239
layer layer2.1.bn2 forward_ms 0.099584 backward_ms 0.129006
layer layer2.1.conv3 forward_ms 0.096621 backward_ms 0.129583
layer layer2.1.bn3 forward_ms 0.093867 backward_ms 0.163812
layer layer2.2.conv1 forward_ms 0.112146 backward_ms 0.148282
layer layer2.2.bn1 forward_ms 0.099917 backward_ms 0.140199
layer layer2.2.conv2 forward_ms 0.161877 backward_ms 0.223038
layer layer2.2.bn2 forward_ms 0.113574 backward_ms 0.134832
layer layer2.2.conv3 forward_ms 0.098996 backward_ms 0.135224
layer layer2.2.bn3 forward_ms 0.095641 backward_ms 0.153361
layer layer2.3.conv1 forward_ms 0.122219 backward_ms 0.192222
layer layer2.3.bn1 forward_ms 0.105344 backward_ms 0.14398
layer layer2.3.conv2 forward_ms 0.135069 backward_ms 0.222761
layer layer2.3.bn2 forward_ms 0.096705 backward_ms 0.140073
layer layer2.3.conv3 forward_ms 0.117025 backward_ms 0.166012
layer layer2.3.bn3 forward_ms 0.101009 backward_ms 0.170981
layer layer3.0.conv1 forward_ms 0.17357 backward_ms 0.192666
layer layer3.0.bn1 forward_ms 0.107528 backward_ms 0.157602
layer layer3.0.conv2 forward_ms 0.142947 backward_ms 0.211868
layer layer3.0.bn2 forward_ms 0.100754 backward_ms 0.154688
layer layer3.0.conv3 forward_ms 0.109927 backward_ms 0.205853
layer layer3.0.bn3 forward_ms 0.10232 backward_ms 0.154079
layer layer3.0.downsample.0 forward_ms 0.127547 backward_ms 0.220302
layer layer3.0.downsample.1 forward_ms 0.102807 backward_ms 0.181371
layer layer3.1.conv1 forward_ms 0.166699 backward_ms 0.18769
layer layer3.1.bn1 forward_ms 0.09548 backward_ms 0.163442
layer layer3.1.conv2 forward_ms 0.118613 backward_ms 0.248741
layer layer3.1.bn2 forward_ms 0.094891 backward_ms 0.14613
layer layer3.1.conv3 forward_ms 0.090821 backward_ms 0.189024
layer layer3.1.bn3 forward_ms 0.092329 backward_ms 0.18188
layer layer3.2.conv1 forward_ms 0.135981 backward_ms 0.172891
layer layer3.2.bn1 forward_ms 0.086139 backward_ms 0.151544
layer layer3.2.conv2 forward_ms 0.122824 backward_ms 0.226683
layer layer3.2.bn2 forward_ms 0.090445 backward_ms 0.149245
layer layer3.2.conv3 forward_ms 0.086095 backward_ms 0.187851
layer layer3.2.bn3 forward_ms 0.087807 backward_ms 0.170079
layer layer3.3.conv1 forward_ms 0.136951 backward_ms 0.176147
layer layer3.3.bn1 forward_ms 0.0922 backward_ms 0.161422
layer layer3.3.conv2 forward_ms 0.156303 backward_ms 0.220351
layer layer3.3.bn2 forward_ms 0.10337 backward_ms 0.158184
layer layer3.3.conv3 forward_ms 0.096405 backward_ms 0.205335
layer layer3.3.bn3 forward_ms 0.084258 backward_ms 0.17473
layer layer3.4.conv1 forward_ms 0.15205 backward_ms 0.201465
layer layer3.4.bn1 forward_ms 0.099842 backward_ms 0.155433
layer layer3.4.conv2 forward_ms 0.12132 backward_ms 0.226426
layer layer3.4.bn2 forward_ms 0.085839 backward_ms 0.173285
layer layer3.4.conv3 forward_ms 0.082862 backward_ms 0.20357
layer layer3.4.bn3 forward_ms 0.078767 backward_ms 0.170126
layer layer3.5.conv1 forward_ms 0.144309 backward_ms 0.201194
layer layer3.5.bn1 forward_ms 0.088835 backward_ms 0.161816
layer layer3.5.conv2 forward_ms 0.121093 backward_ms 0.232446
layer layer3.5.bn2 forward_ms 0.088814 backward_ms 0.149928
layer layer3.5.conv3 forward_ms 0.080092 backward_ms 0.219799
layer layer3.5.bn3 forward_ms 0.07783 backward_ms 0.164226
layer layer4.0.conv1 forward_ms 0.111906 backward_ms 0.20298
layer layer4.0.bn1 forward_ms 0.093206 backward_ms 0.143838
layer layer4.0.conv2 forward_ms 0.143559 backward_ms 0.225724
layer layer4.0.bn2 forward_ms 0.107107 backward_ms 0.150675
layer layer4.0.conv3 forward_ms 0.133664 backward_ms 0.186918
layer layer4.0.bn3 forward_ms 0.10584 backward_ms 0.124994
layer layer4.0.downsample.0 forward_ms 0.102472 backward_ms 0.191183
layer layer4.0.downsample.1 forward_ms 0.104044 backward_ms 0.152864
layer layer4.1.conv1 forward_ms 0.155814 backward_ms 0.201034
layer layer4.1.bn1 forward_ms 0.109981 backward_ms 0.150975
layer layer4.1.conv2 forward_ms 0.127596 backward_ms 0.211837
layer layer4.1.bn2 forward_ms 0.094421 backward_ms 0.158466
layer layer4.1.conv3 forward_ms 0.125409 backward_ms 0.194559
layer layer4.1.bn3 forward_ms 0.101218 backward_ms 0.177871
layer layer4.2.conv1 forward_ms 0.146989 backward_ms 0.192837
layer layer4.2.bn1 forward_ms 0.095198 backward_ms 0.153334
layer layer4.2.conv2 forward_ms 0.121075 backward_ms 0.217249
layer layer4.2.bn2 forward_ms 0.096568 backward_ms 0.181969
layer layer4.2.conv3 forward_ms 0.113512 backward_ms 0.311096
layer layer4.2.bn3 forward_ms 0.096277 backward_ms 0.606752
layer fc forward_ms 0.351771 backward_ms 0.734711
# other: modules without parameters 0 ms, outside the layers 16.8569 ms
other forward_ms 16.8569 backward_ms 0
# the compute thread's CPU time per iteration (less than the wall time where it waited or shared a core)
cpu iteration_ms 34.3599
shape conv1 kind conv tensor weight 64x3x7x7
shape bn1 kind other tensor weight 64 tensor bias 64
shape layer1.0.conv1 kind conv tensor weight 64x64x1x1
shape layer1.0.bn1 kind other tensor weight 64 tensor bias 64
shape layer1.0.conv2 kind conv tensor weight 64x64x3x3
shape layer1.0.bn2 kind other tensor weight 64 tensor bias 64
shape layer1.0.conv3 kind conv tensor weight 256x64x1x1
shape layer1.0.bn3 kind other tensor weight 256 tensor bias 256
shape layer1.0.downsample.0 kind conv tensor weight 256x64x1x1
shape layer1.0.downsample.1 kind other tensor weight 256 tensor bias 256
shape layer1.1.conv1 kind conv tensor weight 64x256x1x1
shape layer1.1.bn1 kind other tensor weight 64 tensor bias 64
shape layer1.1.conv2 kind conv tensor weight 64x64x3x3
shape layer1.1.bn2 kind other tensor weight 64 tensor bias 64
shape layer1.1.conv3 kind conv tensor weight 256x64x1x1
shape layer1.1.bn3 kind other tensor weight 256 tensor bias 256
shape layer1.2.conv1 kind conv tensor weight 64x256x1x1
shape layer1.2.bn1 kind other tensor weight 64 tensor bias 64
shape layer1.2.conv2 kind conv tensor weight 64x64x3x3
shape layer1.2.bn2 kind other tensor weight 64 tensor bias 64
shape layer1.2.conv3 kind conv tensor weight 256x64x1x1
shape layer1.2.bn3 kind other tensor weight 256 tensor bias 256
shape layer2.0.conv1 kind conv tensor weight 128x256x1x1
shape layer2.0.bn1 kind other tensor weight 128 tensor bias 128
shape layer2.0.conv2 kind conv tensor weight 128x128x3x3
shape layer2.0.bn2 kind other tensor weight 128 tensor bias 128
shape layer2.0.conv3 kind conv tensor weight 512x128x1x1
shape layer2.0.bn3 kind other tensor weight 512 tensor bias 512
shape layer2.0.downsample.0 kind conv tensor weight 512x256x1x1
shape layer2.0.downsample.1 kind other tensor weight 512 tensor bias 512
shape layer2.1.conv1 kind conv tensor weight 128x512x1x1
shape layer2.1.bn1 kind other tensor weight 128 tensor bias 128
shape layer2.1.conv2 kind conv tensor weight 128x128x3x3
shape layer2.1.bn2 kind other tensor weight 128 tensor bias 128
shape layer2.1.conv3 kind conv tensor weight 512x128x1x1
shape layer2.1.bn3 kind other tensor weight 512 tensor bias 512
shape layer2.2.conv1 kind conv tensor weight 128x512x1x1
shape layer2.2.bn1 kind other tensor weight 128 tensor bias 128
shape layer2.2.conv2 kind conv tensor weight 128x128x3x3
shape layer2.2.bn2 kind other tensor weight 128 tensor bias 128
shape layer2.2.conv3 kind conv tensor weight 512x128x1x1
shape layer2.2.bn3 kind other tensor weight 512 tensor bias 512
shape layer2.3.conv1 kind conv tensor weight 128x512x1x1
shape layer2.3.bn1 kind other tensor weight 128 tensor bias 128
shape layer2.3.conv2 kind conv tensor weight 128x128x3x3
shape layer2.3.bn2 kind other tensor weight 128 tensor bias 128
shape layer2.3.conv3 kind conv tensor weight 512x128x1x1
shape layer2.3.bn3 kind other tensor weight 512 tensor bias 512
shape layer3.0.conv1 kind conv tensor weight 256x512x1x1
shape layer3.0.bn1 kind other tensor weight 256 tensor bias 256
shape layer3.0.conv2 kind conv tensor weight 256x256x3x3
shape layer3.0.bn2 kind other tensor weight 256 tensor bias 256
shape layer3.0.conv3 kind conv tensor weight 1024x256x1x1
shape layer3.0.bn3 kind other tensor weight 1024 tensor bias 1024
shape layer3.0.downsample.0 kind conv tensor weight 1024x512x1x1
shape layer3.0.downsample.1 kind other tensor weight 1024 tensor bias 1024
shape layer3.1.conv1 kind conv tensor weight 256x1024x1x1
shape layer3.1.bn1 kind other tensor weight 256 tensor bias 256
shape layer3.1.conv2 kind conv tensor weight 256x256x3x3
shape layer3.1.bn2 kind other tensor weight 256 tensor bias 256
shape layer3.1.conv3 kind conv tensor weight 1024x256x1x1
shape layer3.1.bn3 kind other tensor weight 1024 tensor bias 1024
shape layer3.2.conv1 kind conv tensor weight 256x1024x1x1
shape layer3.2.bn1 kind other tensor weight 256 tensor bias 256
shape layer3.2.conv2 kind conv tensor weight 256x256x3x3
shape layer3.2.bn2 kind other tensor weight 256 tensor bias 256
shape layer3.2.conv3 kind conv tensor weight 1024x256x1x1
shape layer3.2.bn3 kind other tensor weight 1024 tensor bias 1024
shape layer3.3.conv1 kind conv tensor weight 256x1024x1x1
shape layer3.3.bn1 kind other tensor weight 256 tensor bias 256
shape layer3.3.conv2 kind conv tensor weight 256x256x3x3
shape layer3.3.bn2 kind other tensor weight 256 tensor bias 256
shape layer3.3.conv3 kind conv tensor weight 1024x256x1x1
shape layer3.3.bn3 kind other tensor weight 1024 tensor bias 1024
shape layer3.4.conv1 kind conv tensor weight 256x1024x1x1
shape layer3.4.bn1 kind other tensor weight 256 tensor bias 256
shape layer3.4.conv2 kind conv tensor weight 256x256x3x3
shape layer3.4.bn2 kind other tensor weight 256 tensor bias 256
shape layer3.4.conv3 kind conv tensor weight 1024x256x1x1
shape layer3.4.bn3 kind other tensor weight 1024 tensor bias 1024
shape layer3.5.conv1 kind conv tensor weight 256x1024x1x1
shape layer3.5.bn1 kind other tensor weight 256 tensor bias 256
shape layer3.5.conv2 kind conv tensor weight 256x256x3x3
shape layer3.5.bn2 kind other tensor weight 256 tensor bias 256
shape layer3.5.conv3 kind conv tensor weight 1024x256x1x1
shape layer3.5.bn3 kind other tensor weight 1024 tensor bias 1024
shape layer4.0.conv1 kind conv tensor weight 512x1024x1x1
shape layer4.0.bn1 kind other tensor weight 512 tensor bias 512
shape layer4.0.conv2 kind conv tensor weight 512x512x3x3
shape layer4.0.bn2 kind other tensor weight 512 tensor bias 512
shape layer4.0.conv3 kind conv tensor weight 2048x512x1x1
shape layer4.0.bn3 kind other tensor weight 2048 tensor bias 2048
shape layer4.0.downsample.0 kind conv tensor weight 2048x1024x1x1
shape layer4.0.downsample.1 kind other tensor weight 2048 tensor bias 2048
shape layer4.1.conv1 kind conv tensor weight 512x2048x1x1
shape layer4.1.bn1 kind other tensor weight 512 tensor bias 512
shape layer4.1.conv2 kind conv tensor weight 512x512x3x3
shape layer4.1.bn2 kind other tensor weight 512 tensor bias 512
shape layer4.1.conv3 kind conv tensor weight 2048x512x1x1
shape layer4.1.bn3 kind other tensor weight 2048 tensor bias 2048
shape layer4.2.conv1 kind conv tensor weight 512x2048x1x1
shape layer4.2.bn1 kind other tensor weight 512 tensor bias 512
shape layer4.2.conv2 kind conv tensor weight 512x512x3x3
shape layer4.2.bn2 kind other tensor weight 512 tensor bias 512
shape layer4.2.conv3 kind conv tensor weight 2048x512x1x1
shape layer4.2.bn3 kind other tensor weight 2048 tensor bias 2048
shape fc kind fc M 1000 N 2048 rows 1 factorable 1 tensor weight 1000x2048 tensor bias 1000
