import pytest

@pytest.mark.xdist_group("explicit")
def test_e(request):
    open("/tmp/xd/out.txt","a").write(f"{request.node.nodeid}\n")

@pytest.mark.process
def test_p(request):
    open("/tmp/xd/out.txt","a").write(f"{request.node.nodeid}\n")
