"""Download the course data files into this folder: python data/download.py --help"""
import pathlib, sys
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from tasks.course.starter_data import main  # noqa: E402
sys.exit(main())
