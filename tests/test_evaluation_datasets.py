"""Dataset readers: YOLO txt labels (folder, data.yaml, classes.txt, polygons, background images) and COCO JSON,
and the errors a wrong label gets: the file and line (or JSON entry), what was wrong, what to write."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from edgeaccel.errors import InputError
from edgeaccel.evaluation import read_dataset
from edgeaccel.evaluation.classmap import map_classes
from edgeaccel.evaluation.dataset import dataset_kind

SHIPPED = Path(__file__).parent / "data" / "traffic_val"


def write_image(path: Path, width: int = 80, height: int = 40) -> Path:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((height, width, 3), 90, np.uint8)).save(path)
    return path


def yolo_folder(root: Path, labels: dict[str, str], names: str | None = "a\nb\n") -> Path:
    for stem, text in labels.items():
        write_image(root / "images" / f"{stem}.png")
        if text is not None:
            (root / "labels").mkdir(parents=True, exist_ok=True)
            (root / "labels" / f"{stem}.txt").write_text(text)
    if names is not None:
        (root / "classes.txt").write_text(names)
    return root


def test_shipped_yolo_and_coco_labels_are_the_same_boxes():
    yolo = read_dataset(SHIPPED)
    coco = read_dataset(SHIPPED / "annotations.json")
    assert yolo.format == "yolo" and coco.format == "coco"
    assert len(yolo.images) == len(coco.images) == 4 and len(yolo.annotations) == len(coco.annotations) == 10
    assert yolo.names == {0: "sedan", 1: "pickup_suv_van", 2: "large_veh_bus"}
    assert coco.names == {1: "sedan", 2: "pickup_suv_van", 3: "large_veh_bus"}
    for y, c in zip(yolo.annotations, coco.annotations, strict=True):
        assert yolo.name(y.class_id) == coco.name(c.class_id)
        np.testing.assert_allclose(y.xywh, c.xywh, atol=0.01)


def test_yolo_folder_boxes_in_pixels_and_background_images(tmp_path):
    root = yolo_folder(tmp_path, {"one": "1 0.5 0.5 0.5 0.5\n\n0 0.1 0.2 0.2 0.4\n", "two": None})
    data = read_dataset(root)
    assert [i.path.name for i in data.images] == ["one.png", "two.png"]
    assert (data.images[0].width, data.images[0].height) == (80, 40)
    assert [(a.class_id, a.xywh) for a in data.annotations] == [(1, (20.0, 10.0, 40.0, 20.0)),
                                                                (0, (0.0, 0.0, 16.0, 16.0))]
    assert data.names == {0: "a", 1: "b"}
    assert any("1 of 2 images have no label file" in n for n in data.notes)


def test_yolo_polygon_line_is_its_bounding_box(tmp_path):
    data = read_dataset(yolo_folder(tmp_path, {"p": "0 0.1 0.1 0.5 0.2 0.3 0.6\n"}))
    np.testing.assert_allclose(data.annotations[0].xywh, (8.0, 4.0, 32.0, 20.0))


def test_data_yaml_split_and_names(tmp_path):
    write_image(tmp_path / "ds" / "images" / "val" / "x.jpg")
    (tmp_path / "ds" / "labels" / "val").mkdir(parents=True)
    (tmp_path / "ds" / "labels" / "val" / "x.txt").write_text("2 0.5 0.5 1 1\n")
    (tmp_path / "ds" / "data.yaml").write_text("path: .\nval: images/val\nnames: [cat, dog, bird]\n")
    data = read_dataset(tmp_path / "ds" / "data.yaml")
    assert data.names[2] == "bird" and data.annotations[0].xywh == (0.0, 0.0, 80.0, 40.0)
    assert dataset_kind(tmp_path / "ds")[0] == "yolo"


@pytest.mark.parametrize("line, says", [
    ("0 0.5 0.5 0.2", "4 values"),
    ("0 0.5 zero 0.2 0.2", "not a number"),
    ("1.5 0.5 0.5 0.2 0.2", "not a class id"),
    ("-1 0.5 0.5 0.2 0.2", "not a class id"),
    ("7 0.5 0.5 0.2 0.2", "class 7 is not among"),
    ("0 40 20 10 10", "not normalized"),
    ("0 0.5 0.5 0 0.2", "no area"),
    ("0 nan 0.5 0.2 0.2", "not normalized"),
])
def test_bad_label_line_names_file_and_line(tmp_path, line, says):
    root = yolo_folder(tmp_path, {"img": f"0 0.5 0.5 0.2 0.2\n{line}\n"})
    with pytest.raises(InputError) as err:
        read_dataset(root)
    assert "img.txt:2: " in err.value.message and says in err.value.message
    assert "class cx cy w h" in err.value.hint or "names" in err.value.hint


def coco_file(tmp_path: Path, **changes) -> Path:
    write_image(tmp_path / "images" / "a.png")
    data = {"images": [{"id": 7, "file_name": "a.png", "width": 80, "height": 40}],
            "annotations": [{"id": 1, "image_id": 7, "category_id": 3, "bbox": [1, 2, 30, 20], "iscrowd": 0},
                            {"id": 2, "image_id": 7, "category_id": 3, "bbox": [40, 2, 30, 30], "iscrowd": 1,
                             "area": 500}],
            "categories": [{"id": 3, "name": "car"}]}
    data.update(changes)
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(data))
    return path


def test_coco_json_with_crowd_and_area(tmp_path):
    data = read_dataset(coco_file(tmp_path))
    assert data.images[0].path == tmp_path / "images" / "a.png"  # found in images/ beside the JSON
    assert [(a.image_id, a.class_id, a.iscrowd, a.area) for a in data.annotations] == [(7, 3, False, None),
                                                                                        (7, 3, True, 500.0)]
    assert data.names == {3: "car"}


@pytest.mark.parametrize("changes, says", [
    ({"annotations": [{"image_id": 7, "category_id": 3, "bbox": [1, 2, 30]}]}, "annotations[0].bbox must be 4"),
    ({"annotations": [{"image_id": 9, "category_id": 3, "bbox": [1, 2, 3, 4]}]}, "image_id 9 is not in"),
    ({"annotations": [{"image_id": 7, "category_id": 5, "bbox": [1, 2, 3, 4]}]}, "category_id 5 is not in"),
    ({"annotations": [{"image_id": 7, "bbox": [1, 2, 3, 4]}]}, "annotations[0] has no `category_id`"),
    ({"annotations": [{"image_id": 7, "category_id": 3, "bbox": [10, 10, -3, 4]}]}, "negative width"),
    ({"images": [{"id": 1, "file_name": "missing.png"}]}, "does not exist"),
])
def test_bad_coco_entry_is_named(tmp_path, changes, says):
    with pytest.raises(InputError) as err:
        read_dataset(coco_file(tmp_path, **changes))
    assert says in err.value.message and "instances.json" in err.value.message


def test_not_json_and_not_a_dataset(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('{"images": [\n')
    with pytest.raises(InputError, match="broken.json:2: not valid JSON"):
        read_dataset(bad)
    (tmp_path / "plain").mkdir()
    with pytest.raises(InputError, match="not a labelled dataset"):
        read_dataset(tmp_path / "plain")


def test_class_mapping_by_name_by_id_and_as_given():
    by_name = map_classes({0: "Dog", 1: "cat"}, [0, 1], {0: "cat", 1: "dog", 2: "bird"})
    assert by_name.how == "by name" and by_name.model_to_dataset == {0: 1, 1: 0}
    by_id = map_classes({0: "0", 1: "1"}, [0, 1, 5], {})
    assert by_id.how == "by id" and by_id.model_to_dataset == {0: 0, 1: 1, 5: 5}
    partial = map_classes({0: "dog", 1: "zebra"}, [0, 1], {0: "dog"})
    assert partial.unmapped == [1] and "zebra" in partial.describe({0: "dog", 1: "zebra"})
    given = map_classes({1: "car"}, [1], {0: "sedan"}, {"car": "sedan"})
    assert given.model_to_dataset == {0: 1} and given.how == "as given"
    with pytest.raises(InputError, match="no class name of the model"):
        map_classes({0: "dog"}, [0], {0: "cat"})
